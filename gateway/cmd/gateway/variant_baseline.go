//go:build !fixed

package main

import "burnlab/gateway/internal/transcript"

// variant is chosen when the binary is built (`-tags fixed` for the fix),
// never at run time: an image tag names exactly one behaviour.
const variant = "baseline"

func newTranscript(int) transcript.Transcript { return &transcript.Baseline{} }
