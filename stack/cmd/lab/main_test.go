package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"burnlab/shared/freeport"
)

func TestErrors(t *testing.T) {
	// Nothing listens there: no lab is running.
	addr := freeport.ForTest(t)
	for args, want := range map[string]string{
		"":                                       "usage",
		"down":                                   "unknown command",
		"switch -variant fixed -control " + addr: "no running lab",
	} {
		err := run(context.Background(), strings.Fields(args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lab %s: %v, want %q", args, err, want)
		}
	}
}
