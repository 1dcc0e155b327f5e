//go:build fixed

package main

import (
	"burnlab/gateway/internal/transcript"
	"burnlab/shared/variant"
)

// thisBuild is the fix's: a transcript per stream whose blocks come from
// one pool for the process.
func thisBuild() build {
	var pool transcript.Pool
	return build{variant.Fixed, func() transcript.Transcript { return transcript.NewFixed(&pool) }}
}
