package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// flusher coalesces the lines written to a client: they collect in a buffer
// while upstream bytes are already at hand, and go out in one write, and a
// flush where one is needed (flush), when the loop is about to wait on the
// upstream again. Events that
// arrive in bursts then cost no syscall each, and none waits on a read.
//
// The buffer is a plain slice the forwarding loop builds its lines in,
// then ends them (end), so a rewritten line is made where it is sent
// from, not made elsewhere and copied. A stream holds it only while it has
// lines to send: each flush gives it back to the pool, and the next event
// takes one (take), so a stream that waits on its upstream holds none.
type flusher struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     []byte
	timeout time.Duration
	err     error
	// http1 says w is net/http's HTTP/1 response, where a write larger
	// than directWrite reaches the connection within the write (flush).
	http1 bool
}

// writeAt is how much a burst buffers before it is written without waiting
// for the flush: the write size of a long burst. Each write costs a syscall
// or two and wakes the client, whatever its size, so a long burst is
// written in large pieces; a buffer is held only while a burst lasts
// (take), so its size is not every waiting stream's.
const writeAt = 64 << 10

// bufferSize leaves room for the line that crosses writeAt.
const bufferSize = writeAt + 4<<10

// writeBuffers keep the buffers of flushers that are done for the next
// stream's (see readBuffers).
var writeBuffers = sync.Pool{New: func() any { return new([bufferSize]byte) }}

func newFlusher(w http.ResponseWriter, timeout time.Duration) *flusher {
	return &flusher{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// take readies the buffer for the lines of an event: the forwarding loop
// calls it before each. Lines appended without it (the end of a stream
// that failed) still go out, in a buffer of their own.
func (f *flusher) take() {
	if f.buf == nil {
		f.buf = writeBuffers.Get().(*[bufferSize]byte)[:0]
	}
}

// release gives an empty buffer back to the pool.
func (f *flusher) release() {
	if cap(f.buf) == bufferSize {
		writeBuffers.Put((*[bufferSize]byte)(f.buf[:bufferSize]))
	}
	f.buf = nil
}

// line buffers b and a newline; the first error sticks and is reported by
// flush.
func (f *flusher) line(b []byte) {
	f.buf = append(f.buf, b...)
	f.end()
}

// end ends the line appended to buf.
func (f *flusher) end() {
	f.buf = append(f.buf, '\n')
	f.spill()
}

// spill writes the buffer once it holds writeAt bytes: the forwarding loop
// calls it after each line it ended itself.
func (f *flusher) spill() {
	if len(f.buf) >= writeAt {
		f.write()
	}
}

// write hands what is buffered to the connection without a flush, under a
// fresh write deadline: a burst that fills the buffer after a long upstream
// pause must not run on the deadline of the flush before that pause.
func (f *flusher) write() {
	if f.err == nil && len(f.buf) > 0 {
		f.deadline()
	}
	f.send()
}

// send writes what is buffered and empties the buffer.
func (f *flusher) send() {
	if f.err == nil && len(f.buf) > 0 {
		if _, err := f.w.Write(f.buf); err != nil {
			f.err = fmt.Errorf("%w: %w", errClientGone, err)
		}
	}
	f.buf = f.buf[:0]
	if cap(f.buf) > 4*writeAt {
		// A long line grew it: it is not kept for the rest of the stream.
		f.buf = writeBuffers.Get().(*[bufferSize]byte)[:0]
	}
}

// done lifts the write deadline, which a kept-alive connection must not
// inherit, and hands the buffer on; the flusher is not used after. Lifting
// can only fail on a connection already gone, with no one left to tell.
func (f *flusher) done() {
	_ = f.rc.SetWriteDeadline(time.Time{})
	f.release()
}

// deadline gives the client the timeout from now to take what follows.
func (f *flusher) deadline() {
	if err := f.rc.SetWriteDeadline(time.Now().Add(f.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
	}
}

// directWrite is the size past which a write to net/http's HTTP/1 response
// reaches the connection before the write returns. The response buffers 2
// KiB before its chunk writer, and the connection 4 KiB after it; a longer
// write passes the first, fills the second behind the chunk's size line
// (and a CRLF of the chunk before), which is written out, and its rest,
// over 4 KiB, is written straight to the socket. All that is left in the
// buffer is the CRLF that ends the chunk. That needs the 2 KiB buffer
// empty when the write comes: it is, as every write the flusher makes is
// either flushed or a mid-burst one of writeAt bytes, itself past it. And
// it needs w to be net/http's response itself, as the gateway's server
// hands it over (shared/service), not one behind a buffering wrapper.
// TestABurstNeedsNoFlush holds net/http to it.
const directWrite = 8 << 10

// flush sends what is buffered, and gives the buffer back until the next
// event (take). A client that takes no bytes for the timeout is given up,
// so a stalled reader cannot hold a stream open.
//
// After a write past directWrite it does not flush net/http's buffer: the
// data is on the connection, and the flush would cost a syscall and a
// packet for the CRLF alone (a third of a burst's writes), which the next
// chunk, or the end of the response, sends anyway. A client reads a chunk's
// data as it comes, not when its CRLF does.
func (f *flusher) flush() error {
	defer f.release()
	if f.err != nil {
		return f.err
	}
	if f.deadline(); f.err != nil {
		return f.err
	}
	direct := f.http1 && len(f.buf) > directWrite
	if f.send(); f.err != nil || direct {
		return f.err
	}
	if err := f.rc.Flush(); err != nil {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
	}
	return f.err
}
