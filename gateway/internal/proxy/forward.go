package proxy

import (
	"bytes"
	"errors"
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

	// texts are the response's text streams, each redacted with its own
	// hold-back state, in order of first appearance.
	texts   []*textStream
	scanner chunk.Scanner
	// Reused per event: each span's stream and, for the escaped ones, its
	// text decoded in text; a redaction. No pointers, so filling them
	// costs no write barriers while the GC marks.
	decoded   []decoded
	text, red []byte
	// For token, of the chunks in the scanner's shape gen: the stream of
	// their text, and their line up to its opening quote (the bytes
	// before it are the same in each).
	tokenStream int
	tokenGen    uint64
	tokenHead   []byte
}

// decoded is a span of the current chunk made ready to redact: its stream,
// an index into texts, and where its text is: text[from:to] when the
// string has escapes, else between the span's quotes in the payload.
type decoded struct {
	stream   int
	from, to int
}

// begin readies a stream whose 200 is sent for forwarding.
func (s *stream) begin(tr transcript.Transcript) {
	s.tr = tr
	s.text, s.red = make([]byte, 0, 256), make([]byte, 0, 256)
}

// textStream is one text of a response that arrives over many chunks: a
// choice's content, refusal or reasoning, or one tool call's arguments.
// PII split across two chunks of one stream is caught by its redactor's
// hold-back; two streams never mix.
type textStream struct {
	key chunk.Key
	red redact.Redactor
	// The last chunk that left text held back: the final release goes out
	// in the upstream's own shape for this stream. tmplGen is the scanner
	// shape it was in: a chunk of the same shape has the same bytes around
	// its text, so it need not be copied again.
	tmpl    []byte
	tmplGen uint64
}

// maxTextStreams bounds the redaction state one response may open (n
// choices × their fields and tool calls).
const maxTextStreams = 64

// textStream finds or opens the stream of key, as an index into s.texts;
// -1 past maxTextStreams.
func (s *stream) textStream(key chunk.Key) int {
	for i, t := range s.texts {
		if t.key == key {
			return i
		}
	}
	if len(s.texts) == maxTextStreams {
		return -1
	}
	s.texts = append(s.texts, &textStream{key: key})
	return len(s.texts) - 1
}

// redactions adds up what every text stream redacted.
func (s *stream) redactions() [redact.NumKinds]int {
	var counts [redact.NumKinds]int
	for _, t := range s.texts {
		for k, n := range t.red.Counts() {
			counts[k] += n
		}
	}
	return counts
}

// forward is the per-event loop. It returns nil once [DONE] is forwarded.
func (s *stream) forward(rd *sse.Reader, out *flusher) error {
	for {
		if !rd.Buffered() {
			// The next read may block: nothing written may wait on it.
			s.acct.settle()
			if err := out.flush(); err != nil {
				return err
			}
		}
		line, err := rd.ReadLine()
		if err != nil {
			return err
		}
		done := false
		switch value, isData := bytes.CutPrefix(line, dataPrefix); {
		case len(line) == 0:
			out.end() // the end of an event: every other line
		case isData:
			done, err = s.data(out, line, value)
		default:
			// A data payload is checked for UTF-8 as it is scanned
			// (dataEvent): the common line is not passed over twice.
			if !utf8.Valid(line) {
				line = s.repairUTF8(line)
			}
			if value, isData = s.otherLine(out, line); isData {
				done, err = s.data(out, line, value)
			}
		}
		if done || err != nil {
			return err
		}
		if rd.SkipEmpty() {
			out.end() // the end of the event, without a read of its own
		}
		if out.err != nil {
			return out.err
		}
	}
}

// data forwards a data line; done is true once it was [DONE] and the
// stream is flushed.
func (s *stream) data(out *flusher, line, value []byte) (done bool, err error) {
	if string(value) == "[DONE]" {
		s.flushTail(out)
		out.line(line)
		out.line(nil)
		return true, out.flush()
	}
	return false, s.dataEvent(out, value)
}

// otherLine forwards or drops a line, not empty, that does not start
// "data: ", and returns the value of one that is a data line all the same
// ("data:x").
func (s *stream) otherLine(out *flusher, line []byte) (value []byte, isData bool) {
	field, value, isField := bytes.Cut(line, []byte{':'})
	switch {
	case line[0] == ':':
		// A comment (keep-alive): pass through.
		out.line(line)
	case !isField:
		s.acct.repair(reasonMalformed)
	case string(field) == "data":
		return bytes.TrimPrefix(value, []byte{' '}), true
	case string(field) == "event" || string(field) == "id" || string(field) == "retry":
		out.line(line)
	default:
		s.acct.repair(reasonMalformed)
	}
	return nil, false
}

// dataEvent forwards one data payload with every text in it redacted
// (each text stream holding back a tail that may still become PII),
// counted, and added to the transcript by the build's parser. The rest of a
// chunk (ids, model, role, finish reason, numbers) is metadata and passes
// as it came: redacting it as text would turn a "created" timestamp into a
// phone number and the chunk into invalid JSON.
//
// A chunk that is JSON but past the limits of an ordinary one (nested too
// deep, an index no client tells apart, more texts than the gateway keeps
// state for, log probabilities or audio it never asked for) ends the
// stream: a client would decode it, escapes and all, and the gateway
// cannot redact what it does not walk.
func (s *stream) dataEvent(out *flusher, payload []byte) error {
	spans, err := s.scanner.Scan(payload)
	if err != nil && errors.Is(err, chunk.ErrBadUTF8) {
		payload = s.repairUTF8(payload)
		spans, err = s.scanner.Scan(payload)
	}
	switch {
	case err == nil:
		if s.token(out, payload, spans) {
			return nil
		}
		reason := s.decode(payload, spans)
		if reason == "" {
			// A chunk that ends a choice comes after all its text: what
			// its other streams still hold goes out first. Its own are
			// flushed as it is rewritten, so a tail still joins the text
			// that follows it.
			for i, t := range s.texts {
				if s.scanner.Finished(t.key.Choice) && !slices.ContainsFunc(s.decoded, func(d decoded) bool { return d.stream == i }) {
					s.release(out, t)
				}
			}
			from := len(out.buf)
			out.buf = s.rewrite(out.buf, payload, spans)
			s.emit(out, from)
			return nil
		}
		if reason == reasonTooManyTexts {
			return unredactable{reason, "more text streams than the gateway redacts (" + strconv.Itoa(maxTextStreams) + ")"}
		}
	case errors.Is(err, chunk.ErrTooMany):
		return unredactable{reasonTooManyTexts, err.Error()}
	case errors.Is(err, chunk.ErrTooDeep) || errors.Is(err, chunk.ErrBadIndex) || errors.Is(err, chunk.ErrUnredactable):
		return unredactable{reasonUnredactable, err.Error()}
	}
	// Not JSON, so no client decodes it either: redacted as plain text, so
	// nothing unparsable carries PII past the gateway.
	if !utf8.Valid(payload) {
		payload = s.repairUTF8(payload)
	}
	s.acct.repair(reasonInvalidJSON)
	red, _ := redact.Text(payload)
	from := len(out.buf)
	out.buf = append(append(out.buf, dataPrefix...), red...)
	s.emit(out, from)
	return nil
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

// decode finds the stream of each span and decodes the strings with
// escapes, or returns why it could not (a repair reason). Every span is
// decoded before any redactor sees one, so a chunk given up half-way
// leaves no stream holding text that was never forwarded. A string without
// escapes is its own text: the common token is not copied.
func (s *stream) decode(payload []byte, spans []chunk.Span) string {
	s.text, s.decoded = s.text[:0], s.decoded[:0]
	for i := range spans {
		sp := &spans[i]
		d := decoded{stream: s.textStream(sp.Key), from: -1}
		if d.stream < 0 {
			return reasonTooManyTexts
		}
		if sp.Escaped {
			d.from = len(s.text)
			var err error
			if s.text, err = openai.AppendUnquote(s.text, payload[sp.Start:sp.End]); err != nil {
				return reasonInvalidJSON
			}
			d.to = len(s.text)
		}
		s.decoded = append(s.decoded, d)
	}
	return ""
}

// rewrite appends to dst the event line of payload with each decoded text
// redacted by its stream.
//
// A string without escapes is redacted straight into the line, neither
// unquoted nor quoted again: the scanner found it valid UTF-8 with no quote,
// backslash or control character, and what a redactor releases is such a
// text's own bytes, replacements, and tails it held, which are never any
// of those (redact.Redactor) — so it is its own JSON.
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
			out = s.plain(out, payload[last:sp.Start+1], payload[sp.Start+1:sp.End-1], t, finished)
		} else {
			text := s.text[d.from:d.to]
			if len(text) > 0 {
				s.acct.token()
			}
			red = t.red.Redact(red[:0], text)
			if finished {
				red = t.red.Flush(red)
			}
			out = append(out, payload[last:sp.Start]...)
			out = openai.AppendQuote(out, red)
		}
		last = sp.End
		s.keepShape(t, payload)
	}
	s.red = red
	return append(out, payload[last:]...)
}

// plain appends head, the bytes of a chunk up to a string without escapes
// and its opening quote, then the string's text redacted by t straight into
// the line, and the closing quote.
func (s *stream) plain(out, head, text []byte, t *textStream, finished bool) []byte {
	if len(text) > 0 {
		s.acct.token()
	}
	out = append(out, head...)
	out = t.red.Redact(out, text)
	if finished {
		out = t.red.Flush(out) // its last text: nothing more can join it
	}
	return append(out, '"')
}

// keepShape keeps payload as t's template for its final release while t
// holds text back, unless the template is a chunk of the same shape.
func (s *stream) keepShape(t *textStream, payload []byte) {
	if gen, hit := s.scanner.Shape(); t.red.Pending() && !(hit && t.tmplGen == gen) {
		t.tmpl, t.tmplGen = append(t.tmpl[:0], payload...), gen
	}
}

// token forwards the chunk nearly every event is, if this is one: in the
// shape of the last chunk walked, with one text, without escapes, and no
// finish reason (so no other stream is released before it). It reports false, having done nothing, for any other.
func (s *stream) token(out *flusher, payload []byte, spans []chunk.Span) bool {
	gen, hit := s.scanner.Shape()
	if !hit || len(spans) != 1 || spans[0].Escaped || s.scanner.Finishing() {
		return false
	}
	sp := &spans[0]
	if s.tokenGen != gen {
		i := s.textStream(sp.Key)
		if i < 0 {
			return false
		}
		s.tokenStream, s.tokenGen = i, gen
		s.tokenHead = append(append(s.tokenHead[:0], dataPrefix...), payload[:sp.Start+1]...)
	}
	t := s.texts[s.tokenStream]
	from := len(out.buf)
	line := s.plain(out.buf, s.tokenHead, payload[sp.Start+1:sp.End-1], t, false)
	out.buf = append(line, payload[sp.End:]...)
	s.keepShape(t, payload)
	s.emit(out, from)
	return true
}

// flushTail releases every stream's held tail, at the end of the stream.
func (s *stream) flushTail(out *flusher) {
	for _, t := range s.texts {
		s.release(out, t)
	}
}

// release sends t's held tail as an event of its own, in the shape of the
// last chunk that held it back: that chunk's other texts empty, and what it
// says once — a finish reason, usage, a tool call's id, type and name —
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
	transcript.AppendLine(s.tr, out.buf[from:])
	out.end()
	s.acct.events++
}
