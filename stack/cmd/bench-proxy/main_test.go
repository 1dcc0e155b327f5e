package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"burnlab/stack/benchproxy"
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

// -from prints a saved report's table and runs nothing.
func TestFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	rep := benchproxy.Report{Events: 10000, Rows: []benchproxy.Row{
		{Target: benchproxy.ReverseProxy, Concurrency: 8, Streams: 500, CPUMsPerStream: 1, StreamsPerSec: 800, P50Ms: 10, P99Ms: 25},
		{Target: benchproxy.Fixed, Concurrency: 8, Streams: 500, CPUMsPerStream: 3, StreamsPerSec: 400, P50Ms: 20, P99Ms: 50},
	}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-from", path, "-root", "/nonexistent"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`gateway-fixed +8 +500 +0 +3\.00 +3\.00 +400 +0\.50 `).MatchString(out.String()) {
		t.Errorf("no gateway-fixed line with its ratios to the ReverseProxy:\n%s", out.String())
	}
}
