package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// flusher coalesces the lines written to a client: they collect in a buffer
// while upstream bytes are already at hand, and go out in one write and one
// flush when the loop is about to wait on the upstream again. Events that
// arrive in bursts then cost no syscall each, and none waits on a read.
type flusher struct {
	w       *bufio.Writer
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

func newFlusher(w http.ResponseWriter, timeout time.Duration) *flusher {
	return &flusher{w: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w), timeout: timeout}
}

// line buffers b and a newline; the first error sticks and is reported by
// flush.
func (f *flusher) line(b []byte) {
	if f.err != nil {
		return
	}
	if _, err := f.w.Write(b); err != nil {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
		return
	}
	if err := f.w.WriteByte('\n'); err != nil {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
	}
}

// done lifts the write deadline, which a kept-alive connection must not
// inherit. It can only fail on a connection already gone, with no one left
// to tell.
func (f *flusher) done() { _ = f.rc.SetWriteDeadline(time.Time{}) }

// flush sends what is buffered. A client that takes no bytes for the
// timeout is given up, so a stalled reader cannot hold a stream open.
func (f *flusher) flush() error {
	if f.err != nil {
		return f.err
	}
	if err := f.rc.SetWriteDeadline(time.Now().Add(f.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
		return f.err
	}
	if err := f.w.Flush(); err != nil {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
		return f.err
	}
	if err := f.rc.Flush(); err != nil {
		f.err = fmt.Errorf("%w: %w", errClientGone, err)
	}
	return f.err
}
