package proxy

import (
	"fmt"
	"io"
	"time"
)

// Limits bound what one upstream stream may cost the gateway, whatever the
// upstream sends: a stream past any of them ends with an error event and
// the reason stream_limit, as an upstream failure (an ordinary generation
// is far under each). Zero fields take the defaults noted on each.
//
// Together they bound a stream's memory: its read buffer (64 KiB) and,
// while a burst lasts, its write buffer (68 KiB), the transcript (Transcript), what its text streams keep
// between events (Held: each one's held tail and the chunk it was held in,
// whose shape the tail goes out in), scratch buffers (the chunk scanner's, the
// decoder's, the redactors') that are let go after
// an event over 64 KiB, and while one event is handled, a few copies of it
// (at most MaxLine each).
type Limits struct {
	// Events bounds the events read from the upstream (default 200,000;
	// a 4,096-token generation is about 4,100).
	Events int
	// Bytes bounds the bytes read from the upstream (default 64 MiB).
	Bytes int64
	// Duration bounds a stream's wall time from the request to the
	// upstream on (default 10 minutes).
	Duration time.Duration
	// Transcript bounds the audit transcript of one stream (default 1
	// MiB). Past it the transcript keeps
	// what it has, the stream goes on, and its log line says
	// transcript_truncated.
	Transcript int
	// Held bounds what a stream's text streams keep between events
	// (default 1 MiB; an ordinary one keeps a chunk of a few hundred
	// bytes a text stream).
	Held int
}

func (l Limits) withDefaults() Limits {
	l.Events = orDefault(l.Events, 200_000)
	l.Bytes = orDefault(l.Bytes, 64<<20)
	l.Duration = orDefault(l.Duration, 10*time.Minute)
	l.Transcript = orDefault(l.Transcript, 1<<20)
	l.Held = orDefault(l.Held, 1<<20)
	return l
}

// limitError ends a stream at one of its Limits.
type limitError struct{ what string }

func (e limitError) Error() string { return "the stream passed the gateway's limit of " + e.what }

func eventsLimit(n int) limitError { return limitError{fmt.Sprintf("%d events", n)} }

// byteBudget ends the upstream body at its limit.
type byteBudget struct {
	r    io.Reader
	left int64
	max  int64
}

func (b *byteBudget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, limitError{fmt.Sprintf("%d bytes", b.max)}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// keepScratch is how large a scratch buffer may stay between events: one
// that a long event grew is let go, not kept for the rest of the stream.
const keepScratch = 64 << 10

// shrink empties b for reuse, or lets it go when an event grew it past
// keepScratch.
func shrink(b []byte) []byte {
	if cap(b) > keepScratch {
		return nil
	}
	return b[:0]
}
