package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// Bad flags are refused before anything is built or started.
func TestRunRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-concurrency", "1,x"},
		{"stray"},
		{"-root", t.TempDir()},
		{"-root", "../../..", "-targets", "direct,haproxy"},
		{"-root", "../../..", "-mem-events", "10000"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if err == nil {
			t.Errorf("%s: no error", strings.Join(args, " "))
		}
	}
}
