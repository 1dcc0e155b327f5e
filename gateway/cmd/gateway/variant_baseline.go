//go:build !fixed

package main

import (
	"burnlab/gateway/internal/transcript"
	"burnlab/shared/variant"
)

// thisBuild is chosen when the binary is built (`-tags fixed` for the
// fix), never at run time: an image tag names exactly one behaviour.
func thisBuild() build {
	return build{variant.Baseline, func() transcript.Transcript { return &transcript.Baseline{} }}
}
