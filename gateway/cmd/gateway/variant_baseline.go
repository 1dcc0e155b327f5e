//go:build !fixed

package main

import "burnlab/gateway/internal/transcript"

// variant is chosen when the binary is built (`-tags fixed` for the fix),
// never at run time: an image tag names exactly one behaviour.
const variant = "baseline"

// newTranscripts returns the gateway's maker of a transcript per stream.
func newTranscripts() func() transcript.Transcript {
	return func() transcript.Transcript { return &transcript.Baseline{} }
}
