// Package sse reads server-sent-event streams as a client's EventSource
// does (the WHATWG HTML standard, "Interpreting an event stream"), with
// bounded memory and no allocation per line: Reader splits the stream into
// lines, Decoder turns the lines into the events a client dispatches.
//
// Both follow the standard, not the common case: a line ends in CRLF, LF or
// a lone CR; a byte order mark at the start of the stream is skipped; an
// event's data lines are joined with LF. A gateway that split lines on LF
// alone, or took each data line for an event, would redact and count
// something other than what its client decodes.
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

// Reader returns the lines of an event stream without their terminators:
// CRLF, LF or a lone CR. A UTF-8 byte order mark at the start of the stream
// is not part of its first line.
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
	// searching the same bytes a second time; term is its terminator's
	// length, 2 for CRLF and 1 for LF or a lone CR.
	next, term int
	// cr says the last line ended in a CR that may be the first half of a
	// CRLF: an LF that follows it ends no line of its own.
	cr bool
	// buf[r:noCR] holds no CR, and buf[noCR] is one when noCR < w. A
	// stream of LF lines has no CR at all: one search of what each read
	// brought answers for every line in it, not a search a line.
	noCR int
	// bomChecked says the start of the stream was looked at for a byte
	// order mark.
	bomChecked bool
}

// bom is U+FEFF in UTF-8: a stream may start with it, and a client skips it.
var bom = []byte("\xEF\xBB\xBF")

// keepBuffer is how large a buffer that a long line or event grew may
// stay for the rest of the stream.
const keepBuffer = 64 << 10

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

// ReadLine returns the next line without its terminator. The slice is
// valid only until the next call. Bytes after the last terminator are not
// a line: the source's error, io.EOF at its end, follows the last one.
func (r *Reader) ReadLine() ([]byte, error) {
	if r.next > 0 {
		// The common case, a line Buffered found: no loop, no search.
		line := r.take()
		if len(line) > r.max {
			return nil, r.tooLong()
		}
		return line, nil
	}
	return r.readLine()
}

// take consumes the line Buffered found and returns it without its
// terminator.
func (r *Reader) take() []byte {
	line := r.buf[r.r : r.r+r.next-r.term]
	r.r += r.next
	r.cr = r.term == 1 && r.buf[r.r-1] == '\r'
	r.next = 0
	return line
}

// readLine is ReadLine when no line is known to be buffered: it searches,
// reads, and assembles a line longer than the buffer.
func (r *Reader) readLine() ([]byte, error) {
	r.long = r.long[:0]
	if cap(r.long) > keepBuffer {
		r.long = nil // the last long line's buffer is not kept for the rest
	}
	long := false
	for {
		if r.Buffered() {
			line := r.take()
			if long {
				r.long = append(r.long, line...)
				line = r.long
			}
			return r.check(line)
		}
		if r.err != nil {
			// What follows the last terminator is no line: the
			// standard's lines all end in one, and a client drops
			// the rest.
			r.r = r.w
			return nil, r.err
		}
		if r.w == len(r.buf) {
			if r.r == 0 {
				// A line longer than the buffer: it is assembled aside.
				r.long, long = append(r.long, r.buf...), true
				r.w, r.noCR = 0, 0
				if len(r.long) > r.max {
					return nil, r.tooLong()
				}
			} else {
				r.w = copy(r.buf, r.buf[r.r:r.w])
				r.noCR = max(r.noCR-r.r, 0)
				r.r = 0
			}
		}
		r.fill()
	}
}

// fill reads once into the free end of the buffer.
func (r *Reader) fill() {
	r.read()
	if !r.bomChecked {
		r.skipBOM()
	}
}

// read reads until it gets bytes or an error.
func (r *Reader) read() {
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

// skipBOM drops a byte order mark at the start of the stream once it can
// tell: a partial mark contains no line terminator, so no line is taken
// before it is decided.
func (r *Reader) skipBOM() {
	b := r.buf[r.r:r.w]
	n := min(len(b), len(bom))
	switch {
	case !bytes.Equal(b[:n], bom[:n]):
		r.bomChecked = true
	case n == len(bom):
		r.r += n
		r.bomChecked = true
	case r.err != nil:
		r.bomChecked = true
	}
}

// check refuses a line over the limit.
func (r *Reader) check(line []byte) ([]byte, error) {
	if len(line) > r.max {
		return nil, r.tooLong()
	}
	return line, nil
}

// tooLong is out of line, so ReadLine is small enough to inline.
func (r *Reader) tooLong() error { return fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.max) }

// ahead returns what is buffered past the last line taken, when it starts
// a line: not after a CR whose LF may follow, nor before the byte order
// mark is decided.
func (r *Reader) ahead() []byte {
	if r.cr || !r.bomChecked {
		return nil
	}
	return r.buf[r.r:r.w]
}

// skip takes n bytes of ahead, which end with an LF.
func (r *Reader) skip(n int) {
	r.r += n
	r.next = 0
}

// SkipEmpty consumes the next line if it is empty and already buffered, and
// reports whether it did: the blank line that ends every event is taken
// without a ReadLine of its own, nor a search.
func (r *Reader) SkipEmpty() bool {
	if r.next > 0 {
		if r.next != r.term {
			return false
		}
		r.take()
		return true
	}
	if !r.afterCR() {
		return false
	}
	switch {
	case r.r < r.w && r.buf[r.r] == '\n':
		r.r++
	case r.r < r.w && r.buf[r.r] == '\r':
		r.r++
		r.cr = true // an LF next is the rest of a CRLF
	default:
		return false
	}
	return true
}

// Buffered reports whether the next ReadLine can be answered without reading
// from the connection: when it cannot, the caller should flush what it has
// written, so that no event waits on a read that may block.
//
// A line ends at the first LF or CR. A CR is the whole terminator unless an
// LF follows it; when the CR is the last byte read, the line is taken all
// the same (a client does not wait either) and an LF that arrives next is
// dropped as the rest of its CRLF.
func (r *Reader) Buffered() bool {
	if r.next > 0 {
		return true
	}
	if !r.afterCR() {
		return false
	}
	b := r.buf[r.r:r.w]
	lf := bytes.IndexByte(b, '\n')
	end := lf
	if lf < 0 {
		end = len(b)
	}
	switch cr := r.crBefore(r.r + end); {
	case cr >= 0 && cr+1 == lf:
		r.next, r.term = cr+2, 2
	case cr >= 0:
		r.next, r.term = cr+1, 1
	case lf >= 0:
		r.next, r.term = lf+1, 1
	default:
		return false
	}
	return true
}

// afterCR drops an LF that completes the CRLF the last line ended in, and
// reports false when it cannot tell yet: nothing is buffered after the CR.
func (r *Reader) afterCR() bool {
	if r.cr {
		if r.r == r.w {
			return false
		}
		if r.buf[r.r] == '\n' {
			r.r++
		}
		r.cr = false
	}
	return true
}

// crBefore returns where the first CR in buf[r:end] is, from r, or -1.
func (r *Reader) crBefore(end int) int {
	if r.noCR < r.r {
		r.noCR = r.r // the CR it pointed at is read
	}
	if r.noCR < r.w && r.buf[r.noCR] != '\r' {
		// What a read brought since the last search.
		if i := bytes.IndexByte(r.buf[r.noCR:r.w], '\r'); i >= 0 {
			r.noCR += i
		} else {
			r.noCR = r.w
		}
	}
	if r.noCR < end {
		return r.noCR - r.r
	}
	return -1
}
