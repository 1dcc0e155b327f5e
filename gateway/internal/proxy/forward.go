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
	// Reused per event: the texts of a chunk's spans (views of the
	// payload, or of text for the escaped ones) and their streams, and a
	// redaction.
	views     [][]byte
	streams   []*textStream
	text, red []byte
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

// textStream finds or opens the stream of key; nil past maxTextStreams.
func (s *stream) textStream(key chunk.Key) *textStream {
	for _, t := range s.texts {
		if t.key == key {
			return t
		}
	}
	if len(s.texts) == maxTextStreams {
		return nil
	}
	t := &textStream{key: key}
	s.texts = append(s.texts, t)
	return t
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
		value, isData := bytes.CutPrefix(line, dataPrefix)
		if !isData {
			// A data payload is checked for UTF-8 as it is scanned
			// (dataEvent): the common line is not passed over twice.
			if !utf8.Valid(line) {
				line = s.repairUTF8(line)
			}
			value, isData = s.otherLine(out, line)
		}
		if isData {
			if string(value) == "[DONE]" {
				s.flushTail(out)
				out.line(line)
				out.line(nil)
				return out.flush()
			}
			if err := s.dataEvent(out, value); err != nil {
				return err
			}
		}
		if out.err != nil {
			return out.err
		}
	}
}

// otherLine forwards or drops a line that does not start "data: ", and
// returns the value of one that is a data line all the same ("data:x").
func (s *stream) otherLine(out *flusher, line []byte) (value []byte, isData bool) {
	field, value, isField := bytes.Cut(line, []byte{':'})
	switch {
	case len(line) == 0 || line[0] == ':':
		// An event boundary or a comment (keep-alive): pass through.
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
	if errors.Is(err, chunk.ErrBadUTF8) {
		payload = s.repairUTF8(payload)
		spans, err = s.scanner.Scan(payload)
	}
	switch {
	case err == nil:
		reason := s.decode(payload, spans)
		if reason == "" {
			// A chunk that ends a choice comes after all its text: what
			// its other streams still hold goes out first. Its own are
			// flushed as it is rewritten, so a tail still joins the text
			// that follows it.
			for _, t := range s.texts {
				if s.scanner.Finished(t.key.Choice) && !slices.Contains(s.streams, t) {
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

// decode finds the text of each span and its stream, or returns why it
// could not (a repair reason). Every span is decoded before any redactor
// sees one, so a chunk given up half-way leaves no stream holding text
// that was never forwarded. A string without escapes is its own text: the
// common token is not copied (the line is valid UTF-8 by now, and JSON
// forbids raw control characters and quotes in it).
func (s *stream) decode(payload []byte, spans []chunk.Span) string {
	s.text, s.views, s.streams = s.text[:0], s.views[:0], s.streams[:0]
	for _, sp := range spans {
		t := s.textStream(sp.Key)
		if t == nil {
			return reasonTooManyTexts
		}
		s.streams = append(s.streams, t)
		if !sp.Escaped {
			s.views = append(s.views, payload[sp.Start+1:sp.End-1])
			continue
		}
		from := len(s.text)
		var err error
		if s.text, err = openai.AppendUnquote(s.text, payload[sp.Start:sp.End]); err != nil {
			return reasonInvalidJSON
		}
		s.views = append(s.views, s.text[from:len(s.text):len(s.text)])
	}
	return ""
}

// rewrite appends to dst the event line of payload with each decoded text
// redacted by its stream.
func (s *stream) rewrite(dst, payload []byte, spans []chunk.Span) []byte {
	// Locals, stored once: while the GC marks, every store of a slice into
	// the stream costs a write barrier, and this runs for every event.
	out, red := append(dst, dataPrefix...), s.red
	gen, hit := s.scanner.Shape()
	last := 0
	for i, sp := range spans {
		t, text := s.streams[i], s.views[i]
		if len(text) > 0 {
			s.acct.token()
		}
		red = t.red.Redact(red[:0], text)
		if s.scanner.Finished(sp.Key.Choice) {
			red = t.red.Flush(red) // its last text: nothing more can join it
		}
		out = append(out, payload[last:sp.Start]...)
		out = openai.AppendQuote(out, red)
		last = sp.End
		if t.red.Pending() && !(hit && t.tmplGen == gen) {
			t.tmpl, t.tmplGen = append(t.tmpl[:0], payload...), gen
		}
	}
	s.red = red
	return append(out, payload[last:]...)
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
