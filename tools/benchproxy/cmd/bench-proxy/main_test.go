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
	"time"

	"burnlab/tools/benchproxy"
)

// Bad flags are refused before anything is built or started.
func TestRunRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-concurrency", "1,x"},
		{"stray"},
		{"-root", t.TempDir()},
		{"-root", "../../../..", "-targets", "direct,haproxy"},
		{"-root", "../../../..", "-mem-events", "10000"},
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

// -save writes the table as a result file, with the flags that shaped the
// run and the machine's facts the report holds.
func TestSaveRun(t *testing.T) {
	rep := &benchproxy.Report{Started: time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC), Events: 10000,
		Machine: benchproxy.Machine{Kernel: "Linux 6.1", Load: "0.10 0.20 0.30", Nginx: "nginx/1.22.1"}}
	path := filepath.Join(t.TempDir(), "bench-proxy.md")
	if err := saveRun(path, "../../../..", rep, "target  conc\ndirect  1\n", []string{"-streams 100"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# The proxy benchmark", "- revision: ", "- date: 2026-12-02 11:00:00 UTC", "Linux 6.1, load average 0.10 0.20 0.30 at the start, nginx/1.22.1",
		"- flags: `-streams 100`", "```\ntarget  conc\ndirect  1\n```"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in:\n%s", want, b)
		}
	}
}
