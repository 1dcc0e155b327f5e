// Package sse reads server-sent-event streams line by line with bounded
// memory and no allocation per line.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrLineTooLong is returned for a line longer than the reader's limit: a
// misbehaving upstream must not make the gateway buffer without bound.
var ErrLineTooLong = errors.New("sse: line too long")

// Reader returns the lines of an event stream without their terminators.
//
// It keeps its own buffer rather than a bufio.Reader's: a line is found
// once (by Buffered, or by ReadLine) and handed out as a slice of it, with
// none of the general reader's bookkeeping per call, which cost as much as
// the search itself at one call per event.
type Reader struct {
	rd   io.Reader
	buf  []byte
	r, w int   // buf[r:w] is read and not yet returned
	err  error // the source's error, returned once what is buffered is
	max  int
	long []byte // assembles lines that do not fit in buf
	// next is the length, terminator included, of the buffered line that
	// Buffered found (0: none found yet), so ReadLine takes it without
	// searching the same bytes a second time.
	next int
}

// minBuffer keeps a tiny buffer size from making every line a long one.
const minBuffer = 16

// maxEmptyReads bounds the reads in a row that return nothing and no
// error, as bufio does: a source that never makes progress is broken.
const maxEmptyReads = 100

// NewReader reads r with a buffer of bufSize bytes and refuses lines longer
// than maxLine bytes.
func NewReader(r io.Reader, bufSize, maxLine int) *Reader {
	return NewReaderBuffer(r, make([]byte, max(bufSize, minBuffer)), maxLine)
}

// NewReaderBuffer is NewReader with buf, at least 16 bytes, as its buffer:
// the caller's until it stops using the Reader.
func NewReaderBuffer(r io.Reader, buf []byte, maxLine int) *Reader {
	return &Reader{rd: r, buf: buf, max: maxLine}
}

// ReadLine returns the next line without its LF or CRLF terminator. The
// slice is valid only until the next call. A last line without a terminator
// is returned as is; io.EOF follows it.
func (r *Reader) ReadLine() ([]byte, error) {
	if n := r.next; n > 0 {
		// The common case, a line Buffered found: no loop, no calls.
		line := r.buf[r.r : r.r+n-1]
		r.r, r.next = r.r+n, 0
		return r.cut(line)
	}
	return r.readLine()
}

// readLine is ReadLine when no line is known to be buffered: it searches,
// reads, and assembles a line longer than the buffer.
func (r *Reader) readLine() ([]byte, error) {
	r.long = r.long[:0]
	long := false
	for {
		if r.Buffered() {
			line := r.buf[r.r : r.r+r.next]
			r.r, r.next = r.r+r.next, 0
			if long {
				r.long = append(r.long, line...)
				line = r.long
			}
			return r.trim(line)
		}
		if r.err != nil {
			line := r.buf[r.r:r.w]
			r.r = r.w
			if long {
				r.long = append(r.long, line...)
				line = r.long
			}
			if len(line) > 0 && errors.Is(r.err, io.EOF) {
				return r.trim(line)
			}
			return nil, r.err
		}
		if r.w == len(r.buf) {
			if r.r == 0 {
				// A line longer than the buffer: it is assembled aside.
				r.long, long = append(r.long, r.buf...), true
				r.w = 0
				if len(r.long) > r.max {
					return nil, r.tooLong()
				}
			} else {
				r.w = copy(r.buf, r.buf[r.r:r.w])
				r.r = 0
			}
		}
		r.fill()
	}
}

// fill reads once into the free end of the buffer.
func (r *Reader) fill() {
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// trim cuts a line's terminator and refuses it over the limit.
func (r *Reader) trim(line []byte) ([]byte, error) {
	// Byte tests, not bytes.TrimSuffix: this runs once a line, and the
	// general helper's comparison costs more than the rest of the read.
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	return r.cut(line)
}

// cut cuts the CR of a CRLF terminator whose LF is cut already, and
// refuses the line over the limit.
func (r *Reader) cut(line []byte) ([]byte, error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > r.max {
		return nil, r.tooLong()
	}
	return line, nil
}

// tooLong is out of line, so trim is small enough to inline.
func (r *Reader) tooLong() error { return fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.max) }

// SkipEmpty consumes the next line if it is empty and already buffered, and
// reports whether it did: the blank line that ends every event is taken
// without a ReadLine of its own.
func (r *Reader) SkipEmpty() bool {
	if r.next > 0 {
		if r.next == 1 || r.next == 2 && r.buf[r.r] == '\r' {
			r.r, r.next = r.r+r.next, 0
			return true
		}
		return false
	}
	switch {
	case r.r < r.w && r.buf[r.r] == '\n':
		r.r++
		return true
	case r.r+1 < r.w && r.buf[r.r] == '\r' && r.buf[r.r+1] == '\n':
		r.r += 2
		return true
	}
	return false
}

// Buffered reports whether the next ReadLine can be answered without reading
// from the connection: when it cannot, the caller should flush what it has
// written, so that no event waits on a read that may block.
func (r *Reader) Buffered() bool {
	if r.next > 0 {
		return true
	}
	i := bytes.IndexByte(r.buf[r.r:r.w], '\n')
	r.next = i + 1
	return i >= 0
}
