package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"burnlab/gateway/internal/chunk"
	"burnlab/gateway/internal/redact"
	"burnlab/gateway/internal/sse"
	"burnlab/gateway/internal/transcript"
	"burnlab/shared/openai"
)

// stream is one request as it is served.
type stream struct {
	route, id string
	acct      accounting
	tr        transcript.Transcript
	lim       Limits
	// fixed is tr when it is the fixed build's, which keeps a fast-path
	// line's shape once (AppendSplit); nil for the baseline's.
	fixed *transcript.Fixed
	// What the stream has cost against lim: events read from the
	// upstream, bytes offered to the transcript (and whether some were
	// left out), bytes its text streams hold between events; over is the
	// limit it passed, which ends it after the event at hand.
	read, kept, held int
	truncated        bool
	over             error

	// texts are the response's text streams, each redacted with its own
	// hold-back state, in order of first appearance; choices is how many
	// the request asked for.
	texts   []*textStream
	choices int
	scanner chunk.Scanner
	// Scratch space reused from event to event. decoded says, for each text
	// of the chunk, its stream and where its decoded text is; text holds
	// the decoded texts that had escapes; red holds a redaction; joined
	// holds the data of an event over several lines, made one line.
	// decoded holds no pointers, so filling it costs no write barriers
	// while the GC marks.
	decoded           []decoded
	text, red, joined []byte
	// otherRedactions counts what was redacted outside the text streams.
	otherRedactions [redact.NumKinds]int
	// fast is what the fast path keeps of the shape it last served.
	fast tokenShape
	// generalOnly sends every chunk by the general path; FuzzRewriter sets
	// it to compare the two paths.
	generalOnly bool
}

// tokenShape is what the fast path (commonToken) keeps of one shape: gen,
// the scanner's number of the walk that found it (0 is no walk's); stream,
// the text stream of its one text, an index into texts; and head, the line
// up to that text's opening quote, the same for every chunk of the shape.
type tokenShape struct {
	gen    uint64
	stream int
	head   []byte
	// end is the rest of the event after the text: its closing quote,
	// the line after it, the line's LF and the blank line's. served says
	// the last event was this shape's, forwarded by commonToken: the run
	// of such events after it may go by tokens.
	end    []byte
	served bool
}

// decoded is a span of the current chunk made ready to redact: its stream,
// an index into texts, and where its text is: text[from:to] when the
// string has escapes, else between the span's quotes in the payload.
type decoded struct {
	stream   int
	from, to int
}

// begin readies a stream whose 200 is sent for forwarding, of a request
// for the given number of choices.
func (s *stream) begin(tr transcript.Transcript, choices int) {
	s.tr, s.choices = tr, choices
	s.fixed, _ = tr.(*transcript.Fixed)
	s.text, s.red = make([]byte, 0, 256), make([]byte, 0, 256)
}

// textStream is one text of a response that arrives over many chunks: a
// choice's content, refusal or reasoning, one tool call's arguments, or a
// value a client joins across chunks (a role, a tool's name or id, any
// other member of a choice; chunk.Field).
// PII split across two chunks of one stream is caught by its redactor's
// hold-back; two streams never mix.
type textStream struct {
	key chunk.Key
	red redact.Redactor
	// tmpl is the release template: the last chunk that left text held
	// back, whose shape the final release of the held tail goes out in.
	// tmplGen is the scanner's number of its shape: a later chunk of the
	// same shape has the same bytes around its text, so it is not copied
	// again.
	tmpl    []byte
	tmplGen uint64
	// joined watches a value a client joins but shows as a value (a role,
	// a tool's name or id: not chunk.Field.Generated): its pieces go out
	// whole, never held back, so joined only tells when one completes PII
	// begun in an earlier piece.
	joined redact.Joined
}

// maxTextStreams bounds the redaction state one response may open (n
// choices × their fields and tool calls).
const maxTextStreams = 64

// textStream finds or opens the stream of key, as an index into s.texts;
// -1 past maxTextStreams, -2 for a choice the request did not ask for: PII
// split across two choices a client joins would be redacted piece by piece.
func (s *stream) textStream(key chunk.Key) int {
	for i, t := range s.texts {
		if t.key == key {
			return i
		}
	}
	if key.Choice >= s.choices {
		return -2
	}
	if len(s.texts) == maxTextStreams {
		return -1
	}
	s.texts = append(s.texts, &textStream{key: key})
	return len(s.texts) - 1
}

// redactions adds up what every text stream and the rest redacted.
func (s *stream) redactions() [redact.NumKinds]int {
	counts := s.otherRedactions
	for _, t := range s.texts {
		for k, n := range t.red.Counts() {
			counts[k] += n
		}
	}
	return counts
}

// forward is the per-event loop over the events a client decodes (see
// sse.Decoder). It returns nil once [DONE] is forwarded.
//
// What it forwards is normalised: every event the gateway writes is its
// type and id lines, its data, and a blank line, with LF line ends, so
// what the client decodes is what the gateway redacted and counted.
func (s *stream) forward(dec *sse.Decoder, out *flusher) error {
	for {
		if s.fast.served && !s.generalOnly {
			if err := s.tokens(dec, out); err != nil {
				return err
			}
		}
		ev, err := dec.Next()
		if err != nil {
			return err
		}
		out.take() // Next flushed, and gave the buffer back, if it waited
		s.fast.served = false
		if s.read++; s.read > s.lim.Events {
			return eventsLimit(s.lim.Events)
		}
		switch {
		case ev.Comment:
			// A keep-alive. Its text is dropped, not forwarded: a
			// client reading the raw stream could read it.
			out.line(keepAlive)
		case ev.Retry != nil:
			out.buf = append(append(out.buf, "retry: "...), ev.Retry...)
			out.end()
		default:
			done, err := s.event(out, ev)
			if done || err != nil {
				return err
			}
		}
		if out.err != nil {
			return out.err
		}
		if s.over != nil {
			return s.over
		}
		// The tenant pays as it streams. Past its reservation a stream
		// draws on the balance; when that is spent it ends here, at most
		// one event over.
		if !s.acct.settle() {
			return errQuotaSpent
		}
	}
}

var keepAlive = []byte(":")

// event forwards one block of the upstream's. done is true once it was
// [DONE] and the stream is flushed.
func (s *stream) event(out *flusher, ev *sse.Event) (done bool, err error) {
	switch {
	case !ev.HasData:
		// An id alone: the client keeps it as its lastEventId.
		s.fields(out, ev)
	case string(ev.Data) == "[DONE]":
		s.flushTail(out)
		s.fields(out, ev)
		out.line(doneLine)
		out.end()
		return true, out.flush()
	default:
		if err := s.dataEvent(out, ev); err != nil {
			return false, err
		}
	}
	out.end() // the blank line that ends the event
	return false, nil
}

var doneLine = []byte("data: [DONE]")

// fields writes the event's type and id, each redacted as a text of its
// own: a client reads both, and the id becomes its lastEventId.
func (s *stream) fields(out *flusher, ev *sse.Event) {
	if len(ev.Type) > 0 {
		s.field(out, "event: ", ev.Type)
	}
	if ev.HasID {
		s.field(out, "id: ", ev.ID)
	}
}

func (s *stream) field(out *flusher, name string, value []byte) {
	if !utf8.Valid(value) {
		value = s.repairUTF8(value)
	}
	red, _ := s.redactText(value)
	out.buf = append(append(out.buf, name...), red...)
	out.end()
}

// redactText redacts a whole string that is no part of a text stream (a
// field, a key, an error's message), counting what it redacts, and says
// whether it changed.
func (s *stream) redactText(text []byte) (red []byte, changed bool) {
	red, counts := redact.Text(text)
	for k, n := range counts {
		s.otherRedactions[k] += n
		changed = changed || n > 0
	}
	return red, changed
}

// dataEvent forwards the data of one event, scanned as the client will
// decode it. A JSON chunk goes by the fast path (commonToken) when it is
// the common token, else by the general path (forwardChunk); data that is
// not JSON goes as text (forwardText); a chunk past the scanner's limits
// ends the stream (scanError).
func (s *stream) dataEvent(out *flusher, ev *sse.Event) error {
	payload := ev.Data
	if ev.Lines {
		payload = s.joinLines(payload)
	}
	spans, err := s.scanner.Scan(payload)
	if errors.Is(err, chunk.ErrBadUTF8) {
		payload = s.repairUTF8(payload)
		spans, err = s.scanner.Scan(payload)
	}
	if err != nil {
		if err = scanError(err); err == errNotJSON {
			return s.forwardText(out, ev, payload)
		}
		return err
	}
	if _, hit := s.scanner.Shape(); !hit {
		// A chunk walked in full has its other strings checked. One in the
		// shape of the last walk has the same bytes outside its text,
		// checked then.
		if payload, spans, err = s.redactOthers(payload, spans); err != nil {
			return err
		}
	}
	if !s.generalOnly && s.commonToken(out, ev, payload, spans) {
		return nil
	}
	return s.forwardChunk(out, ev, payload, spans)
}

// joinLines returns the data of an event over several lines as one line if
// it is JSON, else as it is; repaired first if it has invalid UTF-8, so
// JSON with a bad byte in a string is joined too. In JSON each LF is white
// space between tokens (JSON holds none raw in a string), so with a space
// for each it is the same document.
func (s *stream) joinLines(data []byte) []byte {
	_, err := s.scanner.Scan(data)
	if errors.Is(err, chunk.ErrBadUTF8) {
		data = s.repairUTF8(data)
		_, err = s.scanner.Scan(data)
	}
	if err != nil {
		return data
	}
	s.joined = append(s.joined[:0], data...)
	for i, c := range s.joined {
		if c == '\n' {
			s.joined[i] = ' '
		}
	}
	return s.joined
}

// errNotJSON is scanError's word for data that is no JSON document.
var errNotJSON = errors.New("not JSON")

// scanError says what a chunk the scanner refused is. One past the
// scanner's limits (nested too deep, an index no client tells apart, more
// texts than the gateway keeps state for, more other strings than it
// checks, log probabilities or audio it never asked for) is unredactable:
// a client would decode it, escapes and all, and the gateway cannot redact
// what it does not walk. Anything else is errNotJSON.
func scanError(err error) error {
	switch {
	case errors.Is(err, chunk.ErrTooMany):
		return unredactable{reasonTooManyTexts, err.Error()}
	case errors.Is(err, chunk.ErrTooDeep) || errors.Is(err, chunk.ErrBadIndex) || errors.Is(err, chunk.ErrUnredactable) ||
		errors.Is(err, chunk.ErrTooManyStrings) || errors.Is(err, chunk.ErrNotString):
		return unredactable{reasonUnredactable, err.Error()}
	}
	return errNotJSON
}

// forwardChunk is the general path: it forwards a JSON chunk with every
// text in it redacted by its stream (each holding back a tail that may
// still become PII), counts its tokens, and adds its line to the
// transcript. Numbers and the rest of the chunk's structure pass as they
// came: redacting the raw JSON as text would turn a "created" timestamp
// into a phone number and the chunk into invalid JSON.
func (s *stream) forwardChunk(out *flusher, ev *sse.Event, payload []byte, spans []chunk.Span) error {
	if err := s.decode(payload, spans); err != nil {
		return err
	}
	// A chunk that ends a choice comes after all its text: what its other
	// streams still hold goes out first, as events of the gateway's own.
	// The chunk's own streams are flushed as it is rewritten, so a held
	// tail still joins the text that follows it.
	for i, t := range s.texts {
		if s.scanner.Finished(t.key.Choice) && !slices.ContainsFunc(s.decoded, func(d decoded) bool { return d.stream == i }) {
			s.release(out, t)
		}
	}
	s.fields(out, ev) // after the releases, so they do not take its type and id
	from := len(out.buf)
	out.buf = s.rewrite(out.buf, payload, spans)
	s.emit(out, from)
	s.shrink()
	return nil
}

// forwardText forwards the data of an event that is not JSON, so no strict
// client decodes it: it is redacted as plain text, as the client has it,
// so nothing unparsable carries PII past the gateway, and its lines go out
// as the data lines of one event. A lenient decoder (Python's json takes
// NaN and Infinity, and so does the OpenAI SDK) could still decode its
// escapes into text the redactor never saw, so data that is no JSON but
// holds a backslash is not forwarded at all.
func (s *stream) forwardText(out *flusher, ev *sse.Event, payload []byte) error {
	if bytes.IndexByte(payload, '\\') >= 0 {
		return unredactable{reasonUnredactable, "data that is not JSON but holds escapes, which a lenient decoder would decode"}
	}
	if !utf8.Valid(payload) {
		payload = s.repairUTF8(payload)
	}
	s.acct.repair(reasonInvalidJSON)
	s.fields(out, ev)
	red, _ := s.redactText(payload)
	for line := range bytes.SplitSeq(red, []byte{'\n'}) {
		from := len(out.buf)
		out.buf = append(append(out.buf, dataPrefix...), line...)
		s.keep(out.buf[from:])
		out.end()
	}
	s.acct.events++
	s.shrink()
	return nil
}

// shrink lets go of the scratch buffers an event grew past keepScratch.
func (s *stream) shrink() {
	s.text, s.red, s.joined = shrink(s.text), shrink(s.red), shrink(s.joined)
	s.scanner.Shrink(keepScratch)
	if cap(s.fast.head) > keepScratch {
		s.fast = tokenShape{}
	}
}

// redactOthers returns the chunk with each of the scanner's other strings
// (its ids, keys, an error's message) redacted as a text of its own, and
// its texts found again. It builds a new payload only when one changed: an
// ordinary chunk's ids and keys hold no PII, and their check allocates
// nothing.
func (s *stream) redactOthers(payload []byte, spans []chunk.Span) ([]byte, []chunk.Span, error) {
	var clean []byte
	last := 0
	for _, sp := range s.scanner.Others() {
		text := payload[sp.Start+1 : sp.End-1]
		if sp.Escaped {
			var err error
			if s.text, err = openai.AppendUnquote(s.text[:0], payload[sp.Start:sp.End]); err != nil {
				// Cannot happen: the scanner checked its escapes. Were it
				// to, the string is not passed on unredacted.
				return nil, nil, unredactable{reasonUnredactable, "a string the gateway could not decode: " + err.Error()}
			}
			text = s.text
		}
		red, changed := s.redactText(text)
		if !changed {
			continue
		}
		clean = append(append(clean, payload[last:sp.Start]...), openai.AppendQuote(nil, red)...)
		last = sp.End
	}
	if clean == nil {
		return payload, spans, nil
	}
	clean = append(clean, payload[last:]...)
	spans, err := s.scanner.Scan(clean)
	if err != nil { // cannot happen: only strings changed, each quoted again
		return nil, nil, unredactable{reasonUnredactable, "a chunk the gateway could not redact: " + err.Error()}
	}
	return clean, spans, nil
}

// repairUTF8 returns payload with each invalid sequence made U+FFFD, as a
// client would decode it.
func (s *stream) repairUTF8(payload []byte) []byte {
	s.acct.repair(reasonInvalidUTF8)
	return bytes.ToValidUTF8(payload, []byte("\uFFFD"))
}

// unredactable ends a stream at a chunk the gateway will not forward.
type unredactable struct{ reason, why string }

func (u unredactable) Error() string {
	return "upstream sent a chunk the gateway cannot redact: " + u.why
}

var dataPrefix = []byte("data: ")

// decode finds the text stream of each span and decodes the strings that
// have escapes into s.text, filling s.decoded. Every span is decoded before
// any redactor sees one, so a chunk given up half-way leaves no stream
// holding text that was never forwarded. A string without escapes is its
// own text and is not copied.
func (s *stream) decode(payload []byte, spans []chunk.Span) error {
	s.text, s.decoded = s.text[:0], s.decoded[:0]
	for i := range spans {
		sp := &spans[i]
		d := decoded{stream: s.textStream(sp.Key), from: -1}
		switch d.stream {
		case -1:
			return unredactable{reasonTooManyTexts, "more text streams than the gateway redacts (" + strconv.Itoa(maxTextStreams) + ")"}
		case -2:
			return unredactable{reasonUnredactable, "a choice index past the " + strconv.Itoa(s.choices) + " the request asked for"}
		}
		text := payload[sp.Start+1 : sp.End-1]
		if sp.Escaped {
			d.from = len(s.text)
			var err error
			if s.text, err = openai.AppendUnquote(s.text, payload[sp.Start:sp.End]); err != nil {
				// Cannot happen: the scanner checked every escape. Were it
				// to, the chunk is not passed on as text, escapes and all.
				return unredactable{reasonUnredactable, "a text the gateway could not decode: " + err.Error()}
			}
			d.to = len(s.text)
			text = s.text[d.from:d.to]
		}
		if !sp.Key.Field.Generated() && s.texts[d.stream].joined.Spans(text) {
			return unredactable{reasonUnredactable, "PII split across chunks of a value a client joins (a role, a tool call's name or id)"}
		}
		s.decoded = append(s.decoded, d)
	}
	return nil
}

// rewrite appends to dst the event line of payload with each decoded text
// redacted by its stream.
//
// A string without escapes is redacted straight into the line, neither
// unquoted nor quoted again: the scanner found it valid UTF-8 with no quote,
// backslash or control character, and what a redactor releases is such a
// text's own bytes, replacements, and tails it held, which are never any
// of those (redact.Redactor), so it is its own JSON.
func (s *stream) rewrite(dst, payload []byte, spans []chunk.Span) []byte {
	// Locals, stored once: while the GC marks, every store of a slice into
	// the stream costs a write barrier, and this runs for every event.
	out, red := append(dst, dataPrefix...), s.red
	last := 0
	for i := range spans {
		sp, d := &spans[i], s.decoded[i]
		t := s.texts[d.stream]
		finished := s.scanner.Finished(sp.Key.Choice)
		if d.from < 0 {
			out = s.appendUnescaped(out, payload[last:sp.Start+1], payload[sp.Start+1:sp.End-1], t, finished)
		} else {
			text := s.text[d.from:d.to]
			out = append(out, payload[last:sp.Start]...)
			if !t.key.Field.Generated() {
				whole, _ := s.redactText(text) // whole: joined watched it (decode)
				out = openai.AppendQuote(out, whole)
			} else {
				if len(text) > 0 {
					s.acct.token()
				}
				red = t.red.Redact(red[:0], text)
				if finished {
					red = t.red.Flush(red)
				}
				out = openai.AppendQuote(out, red)
			}
		}
		last = sp.End
		s.keepTemplate(t, payload)
	}
	s.red = red
	return append(out, payload[last:]...)
}

// appendUnescaped appends head (the bytes of a chunk up to a text without
// escapes, its opening quote included), then the text redacted by t
// straight into the line, then the closing quote; finished says the text is
// its stream's last, so nothing is held back. Both paths build such a
// text's part of the line here, so both count and redact it alike; tokens
// does the same with the redactor's plain check (Redactor.RedactPlain).
func (s *stream) appendUnescaped(out, head, text []byte, t *textStream, finished bool) []byte {
	out = append(out, head...)
	if !t.key.Field.Generated() {
		red, _ := s.redactText(text) // whole: joined watched it (decode)
		return append(append(out, red...), '"')
	}
	if len(text) > 0 {
		s.acct.token()
	}
	out = t.red.Redact(out, text)
	if finished {
		out = t.red.Flush(out) // its last text: nothing more can join it
	}
	return append(out, '"')
}

// keepTemplate keeps payload as t's release template while t holds text
// back, unless the template already is a chunk of the same shape, whose
// bytes around the text are the same.
func (s *stream) keepTemplate(t *textStream, payload []byte) {
	gen, hit := s.scanner.Shape()
	s.keepShape(t, payload, gen, hit)
}

// keepShape is keepTemplate for a payload the scanner numbered gen, in a
// shape it had walked before when hit.
func (s *stream) keepShape(t *textStream, payload []byte, gen uint64, hit bool) {
	if t.red.Pending() && !(hit && t.tmplGen == gen) {
		s.keepCopy(t, payload, gen)
	}
}

// keepCopy makes payload t's release template.
func (s *stream) keepCopy(t *textStream, payload []byte, gen uint64) {
	grown := cap(t.tmpl)
	t.tmpl, t.tmplGen = append(t.tmpl[:0], payload...), gen
	if s.held += cap(t.tmpl) - grown; s.held > s.lim.Held {
		s.over = limitError{fmt.Sprintf("%d bytes held for redaction between events", s.lim.Held)}
	}
}

// commonToken is the fast path. If the chunk is the common token it
// forwards it and reports true; for any other chunk it does nothing and
// reports false, and the general path forwards it.
//
// Its output is the general path's: for every stream, the bytes the client
// gets, the transcript and the tokens counted are what forwardChunk makes
// of the same chunks. FuzzRewriter holds the two to that, forwarding every
// stream both ways.
//
// What it saves is the general path's lookups and copies. The bytes before
// the text are the same in every chunk of a shape, so it finds the text's
// stream and builds the line up to the text's opening quote once a shape
// (s.fast), and then writes each token redacted straight after that head.
// A common token has no finish reason, so no other stream is released
// before it, and no escapes, so its text is its bytes.
func (s *stream) commonToken(out *flusher, ev *sse.Event, payload []byte, spans []chunk.Span) bool {
	gen, hit := s.scanner.Shape()
	if !hit || len(spans) != 1 || spans[0].Escaped || s.scanner.Finishing() || !spans[0].Key.Field.Generated() {
		return false
	}
	sp := &spans[0]
	if s.fast.gen != gen {
		i := s.textStream(sp.Key)
		if i < 0 {
			return false
		}
		s.fast.stream, s.fast.gen = i, gen
		s.fast.head = append(append(s.fast.head[:0], dataPrefix...), payload[:sp.Start+1]...)
		s.fast.end = append(append(s.fast.end[:0], payload[sp.End-1:]...), "\n\n"...)
	}
	s.fast.served = true
	t := s.texts[s.fast.stream]
	s.fields(out, ev)
	from := len(out.buf)
	line := s.appendUnescaped(out.buf, s.fast.head, payload[sp.Start+1:sp.End-1], t, false)
	out.buf = append(line, payload[sp.End:]...)
	s.keepTemplate(t, payload)
	s.emitSplit(out, from, len(s.fast.head), len(payload)-sp.End+1)
	return true
}

// tokens forwards the run of common tokens the reader holds after one that
// commonToken forwarded, straight from the reader's buffer: each is a line
// of the last one's shape (its head, then a plain text, then its tail),
// and its blank line. It forwards each as forward and commonToken would,
// without the decoder, the scanner or the general path's checks, whose
// answer for such a line is known: the same shape, one text without
// escapes, no finish reason, no other string to redact. It stops at the
// first line that is not such a token, or not whole in the buffer, and
// leaves it to Next; an error is one that ends the stream.
//
// FuzzRewriter holds its streams to the general path's, as commonToken's.
func (s *stream) tokens(dec *sse.Decoder, out *flusher) error {
	b, maxLine := dec.Ahead()
	head, end := s.fast.head, s.fast.end
	after := end[:len(end)-2] // the text's closing quote and the rest of its line
	t := s.texts[s.fast.stream]
	taken := 0
	defer func() { dec.Skip(taken) }()
	for s.read < s.lim.Events {
		rest := b[taken:]
		n := bytes.IndexByte(rest, '\n')
		if n < 0 || n+1 == len(rest) || rest[n+1] != '\n' || n > maxLine {
			return nil
		}
		line := rest[:n]
		at := len(line) - len(after) // where the text's closing quote is
		if at < len(head) || !bytes.HasPrefix(line, head) || !bytes.Equal(line[at:], after) {
			return nil
		}
		// The text is redacted into the line as appendUnescaped would,
		// by a redactor that checks it is plain as it scans it: a line
		// whose text is not plain is left as it is, to Next.
		text := line[len(head):at]
		from := len(out.buf)
		red, plain := t.red.RedactPlain(append(out.buf, head...), text)
		if !plain {
			return nil
		}
		taken += n + 2
		s.read++
		if len(text) > 0 {
			s.acct.token()
		}
		if t.tmplGen != s.fast.gen && t.red.Pending() { // keepShape's test, inline
			s.keepCopy(t, line[len(dataPrefix):], s.fast.gen)
		}
		// The event's end is appended at once, its two LFs with it; the
		// transcript is given the line without them.
		out.buf = append(red, end...)
		s.keepSplit(out.buf[from:len(out.buf)-2], len(head), len(after))
		s.acct.events++
		out.spill()
		switch {
		case out.err != nil:
			return out.err
		case s.over != nil:
			return s.over
		case !s.acct.settle():
			return errQuotaSpent
		}
	}
	return nil
}

// flushTail releases every stream's held tail, at the end of the stream.
func (s *stream) flushTail(out *flusher) {
	for _, t := range s.texts {
		s.release(out, t)
	}
}

// release sends t's held tail as an event of its own, in the shape of the
// last chunk that held it back: that chunk's other texts empty, and what it
// says once — a finish reason, usage, a tool call's type —
// null, since it went out with that chunk already.
func (s *stream) release(out *flusher, t *textStream) {
	if !t.red.Pending() {
		return
	}
	red := t.red.Flush(s.red[:0])
	var sc chunk.Scanner // a full walk, for the metadata's places
	spans, err := sc.Scan(t.tmpl)
	if err != nil { // cannot happen: tmpl is a chunk Scan accepted
		return
	}
	meta := sc.Meta()
	from := len(out.buf)
	line := append(out.buf, dataPrefix...)
	last, placed := 0, false
	for i, j := 0, 0; i < len(spans) || j < len(meta); {
		if j == len(meta) || i < len(spans) && spans[i].Start < meta[j].Start {
			sp := spans[i]
			i++
			if sp.Start < last {
				continue // inside metadata already nulled
			}
			line = append(line, t.tmpl[last:sp.Start]...)
			if sp.Key == t.key && !placed {
				line, placed = openai.AppendQuote(line, red), true
			} else {
				line = append(line, `""`...)
			}
			last = sp.End
			continue
		}
		m := meta[j]
		j++
		if m.Start < last {
			continue
		}
		line = append(append(line, t.tmpl[last:m.Start]...), "null"...)
		last = m.End
	}
	out.buf, s.red = append(line, t.tmpl[last:]...), red
	s.emit(out, from)
	out.line(nil) // close the event the gateway made
}

// emit forwards the data line built in out's buffer from from on, and
// feeds it to the transcript.
func (s *stream) emit(out *flusher, from int) {
	s.keep(out.buf[from:])
	out.end()
	s.acct.events++
}

// emitSplit is emit for a line of the fast path (keepSplit).
func (s *stream) emitSplit(out *flusher, from, head, tail int) {
	s.keepSplit(out.buf[from:], head, tail)
	out.end()
	s.acct.events++
}

// keepSplit is keep for a line of the fast path: its first head bytes and
// last tail bytes are those of its shape (s.fast), the quotes around its
// text included, the same for every line of the shape.
func (s *stream) keepSplit(line []byte, head, tail int) {
	switch s.kept += len(line); {
	case s.kept > s.lim.Transcript:
		s.truncated = true
	case s.fixed != nil:
		s.fixed.AppendSplit(line, head, tail, s.fast.gen)
	default:
		transcript.AppendLine(s.tr, line)
	}
}

// keep feeds line to the transcript while it is under its limit.
func (s *stream) keep(line []byte) {
	if s.kept += len(line); s.kept <= s.lim.Transcript {
		transcript.AppendLine(s.tr, line)
	} else {
		s.truncated = true
	}
}
