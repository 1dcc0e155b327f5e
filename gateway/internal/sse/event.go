package sse

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrEventTooLong is returned for an event whose data lines, joined, are
// longer than the decoder's limit: many short data lines must not buffer
// without bound where one long line may not.
var ErrEventTooLong = errors.New("sse: event too long")

// Event is one of three things a client's EventSource acts on: a block of
// lines ended by a blank line; a retry field (Retry not nil), which the
// client takes as it is read, in a block or not; or a comment line
// (Comment).
//
// Its slices are the Decoder's, valid until the next call to Next, and the
// caller may change their bytes until then.
type Event struct {
	// Data is the event's data lines joined with LF: the client's
	// event.data.
	Data []byte
	// HasData says the block had a data field, so the client dispatches
	// an event, whose Data may be empty. Lines says it had more than one,
	// so Data holds the LFs that joined them.
	HasData, Lines bool
	// Type is the last event field's value: the client's event type when
	// it dispatches ("message" when empty).
	Type []byte
	// ID is the last id field's value, when HasID: the client's
	// lastEventId from this block on, dispatched or not.
	ID    []byte
	HasID bool
	// Retry is a retry field's value, all ASCII digits: the client's
	// reconnection time in milliseconds from now on.
	Retry []byte
	// Comment says this is a comment line, reported as it is read: no
	// client sees it, but it keeps an idle connection alive.
	Comment bool
}

// Decoder turns the lines of a Reader into the events a client decodes,
// by the standard's rules: a line "name: value" is a field (one space after
// the colon is dropped; a line without a colon is a field with an empty
// value), a line starting with a colon is a comment, and a blank line ends
// the block. A block with neither a data nor an id field dispatches nothing
// and is not returned; a block the stream ends in the middle of is dropped,
// as a client drops it.
type Decoder struct {
	rd *Reader
	// wait runs before a read that may block, so what the caller made of
	// earlier events need not wait on it.
	wait func() error
	max  int
	// ev is the block being read, returned when it ends: its type and id
	// are kept in it as they are read, and data holds its data lines so
	// far, each followed by an LF. ended says it was returned, so the
	// next block starts afresh.
	ev    Event
	data  []byte
	lines int
	ended bool
	// note is a comment or a retry, returned as it is read.
	note    Event
	ignored int
}

// NewDecoder decodes the lines of rd, refusing an event with more than
// maxData bytes of data; wait, if not nil, runs before every read that may
// block, and an error it returns ends the stream.
func NewDecoder(rd *Reader, maxData int, wait func() error) *Decoder {
	return &Decoder{rd: rd, max: maxData, wait: wait}
}

// Ignored reports how many fields the decoder has ignored so far, as a
// client ignores them: a field with another name, an id holding U+0000, a
// retry that is not all digits.
func (d *Decoder) Ignored() int { return d.ignored }

var dataField = []byte("data: ")

// Next returns the next event, the Decoder's until the next call, or the
// error that ended the stream: the Reader's (io.EOF at its end),
// ErrEventTooLong, or wait's.
func (d *Decoder) Next() (*Event, error) {
	if d.ended {
		d.reset()
	}
	for {
		if !d.rd.Buffered() && d.wait != nil {
			if err := d.wait(); err != nil {
				return nil, err
			}
		}
		line, err := d.rd.ReadLine()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if d.end() {
				return &d.ev, nil
			}
			continue
		}
		// The common event, one data line with its blank line already
		// read: its value is returned where it lies, not copied.
		if value, ok := bytes.CutPrefix(line, dataField); ok && d.lines == 0 && d.rd.SkipEmpty() {
			d.ev.Data, d.ev.HasData, d.ended = value, true, true
			return &d.ev, nil
		}
		if line[0] == ':' {
			d.note = Event{Comment: true}
			return &d.note, nil
		}
		retry, err := d.field(line)
		if err != nil {
			return nil, err
		}
		if retry {
			return &d.note, nil
		}
	}
}

// Ahead returns the bytes read past the last line taken, when the decoder
// is between blocks, so that what they start is a new block, and the
// longest line the reader takes; else nil. A caller that finds whole
// events in them, each a line "data: " holding no CR and its blank line,
// both ending in LF, and none longer than maxLine, may take them with Skip
// instead of Next: Next would return each as a data event of its own.
func (d *Decoder) Ahead() (b []byte, maxLine int) {
	if !d.ended && (d.lines > 0 || len(d.ev.Type) > 0 || d.ev.HasID) {
		return nil, 0
	}
	return d.rd.ahead(), d.rd.max
}

// Skip takes the first n bytes of Ahead, which end with an event's blank
// line.
func (d *Decoder) Skip(n int) { d.rd.skip(n) }

// end ends the block at its blank line, and reports whether it is an event
// to return: one with data or an id.
func (d *Decoder) end() bool {
	if d.lines > 0 {
		d.ev.Data = d.data[:len(d.data)-1] // the standard drops the last LF
		d.ev.HasData, d.ev.Lines = true, d.lines > 1
	}
	if d.ev.HasData || d.ev.HasID {
		d.ended = true
		return true
	}
	d.reset()
	return false
}

// reset starts a new block. Only what is set is stored: this runs for
// every event, and each store of a slice costs a write barrier while the
// GC marks.
func (d *Decoder) reset() {
	if len(d.ev.Type) > 0 {
		d.ev.Type = d.ev.Type[:0]
	}
	if cap(d.ev.Type)+cap(d.ev.ID) > keepBuffer {
		d.ev.Type, d.ev.ID = nil, nil // a long one's buffers are not kept
	}
	if d.lines > 0 {
		d.data, d.lines, d.ev.Lines = d.data[:0], 0, false
		if cap(d.data) > keepBuffer {
			d.data = nil // a long event's buffer is not kept for the rest
		}
	}
	d.ev.HasData, d.ev.HasID, d.ended = false, false, false
}

// field takes one field line into the block, or reports a retry field to
// return as it is.
func (d *Decoder) field(line []byte) (retry bool, err error) {
	name, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(name) {
	case "data":
		if len(d.data)+len(value)+1 > d.max {
			return false, fmt.Errorf("%w: over %d bytes of data", ErrEventTooLong, d.max)
		}
		d.data = append(append(d.data, value...), '\n')
		d.lines++
	case "event":
		d.ev.Type = append(d.ev.Type[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) >= 0 {
			d.ignored++
			return false, nil
		}
		d.ev.ID, d.ev.HasID = append(d.ev.ID[:0], value...), true
	case "retry":
		if len(value) == 0 || bytes.ContainsFunc(value, func(r rune) bool { return r < '0' || r > '9' }) {
			d.ignored++
			return false, nil
		}
		d.note = Event{Retry: append(d.note.Retry[:0], value...)}
		return true, nil
	default:
		d.ignored++
	}
	return false, nil
}
