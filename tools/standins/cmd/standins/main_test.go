package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestBadInputIsToldClearly(t *testing.T) {
	ctx := context.Background()
	if err := run(ctx, []string{"-no-such-flag"}, io.Discard); err == nil {
		t.Error("an unknown flag was accepted")
	}
	missing := filepath.Join(t.TempDir(), "busybox")
	err := run(ctx, []string{"-root", "../../../..", "-out", t.TempDir(), "-busybox", missing}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "busybox-static") {
		t.Errorf("a missing busybox: %v; want the package to install named", err)
	}
}
