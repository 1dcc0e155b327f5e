//go:build fixed

package main

import "burnlab/gateway/internal/transcript"

const variant = "fixed"

// newTranscripts returns the gateway's maker of a transcript per stream,
// whose blocks come from one pool for the process.
func newTranscripts() func() transcript.Transcript {
	var pool transcript.Pool
	return func() transcript.Transcript { return transcript.NewFixed(&pool) }
}
