//go:build fixed

package main

import "burnlab/gateway/internal/transcript"

const variant = "fixed"

func newTranscript(events int) transcript.Transcript { return transcript.NewFixed(events) }
