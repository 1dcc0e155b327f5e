// Package sse reads server-sent-event streams line by line with bounded
// memory and no allocation per line.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrLineTooLong is returned for a line longer than the reader's limit: a
// misbehaving upstream must not make the gateway buffer without bound.
var ErrLineTooLong = errors.New("sse: line too long")

// Reader returns the lines of an event stream without their terminators.
type Reader struct {
	br   *bufio.Reader
	max  int
	long []byte // assembles lines that do not fit in br's buffer
	// next is the length, terminator included, of the buffered line that
	// Buffered found (0: none found yet), so ReadLine takes it without
	// searching the same bytes a second time.
	next int
}

// NewReader reads r with a buffer of bufSize bytes and refuses lines longer
// than maxLine bytes.
func NewReader(r io.Reader, bufSize, maxLine int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, bufSize), max: maxLine}
}

// ReadLine returns the next line without its LF or CRLF terminator. The
// slice is valid only until the next call. A last line without a terminator
// is returned as is; io.EOF follows it.
func (r *Reader) ReadLine() ([]byte, error) {
	if n := r.next; n > 0 {
		r.next = 0
		// Peek does not read (n bytes are buffered), and the bytes stay
		// in place after Discard until the next read: the caller's call.
		line, _ := r.br.Peek(n)
		_, _ = r.br.Discard(n)
		return r.trim(line)
	}
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(r.long) > r.max {
				return nil, fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.max)
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	return r.trim(line)
}

// trim cuts a line's terminator and refuses it over the limit.
func (r *Reader) trim(line []byte) ([]byte, error) {
	// Byte tests, not bytes.TrimSuffix: this runs once a line, and the
	// general helper's comparison costs more than the rest of the read.
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > r.max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.max)
	}
	return line, nil
}

// Buffered reports whether the next ReadLine can be answered without reading
// from the connection: when it cannot, the caller should flush what it has
// written, so that no event waits on a read that may block.
func (r *Reader) Buffered() bool {
	if r.next > 0 {
		return true
	}
	n := r.br.Buffered()
	if n == 0 {
		return false
	}
	peek, _ := r.br.Peek(n)
	i := bytes.IndexByte(peek, '\n')
	r.next = i + 1
	return i >= 0
}
