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
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) > r.max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.max)
	}
	return line, nil
}

// Buffered reports whether the next ReadLine can be answered without reading
// from the connection: when it cannot, the caller should flush what it has
// written, so that no event waits on a read that may block.
func (r *Reader) Buffered() bool {
	if r.br.Buffered() == 0 {
		return false
	}
	peek, _ := r.br.Peek(r.br.Buffered())
	return bytes.IndexByte(peek, '\n') >= 0
}
