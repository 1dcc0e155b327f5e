package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burnlab/loadgen/internal/shape"
)

// quadratic answers a stream of max_tokens events after 20 ns × n² — a
// stand-in for the baseline gateway's cost curve.
func quadratic(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		n := req.MaxTokens
		time.Sleep(time.Duration(20 * float64(n) * float64(n)))
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"x"}}]}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

func TestCalibrateFitsAndWritesAShape(t *testing.T) {
	s := quadratic(t)
	out := filepath.Join(t.TempDir(), "shape.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"calibrate", "-target", s.URL, "-tenants", "k", "-o", out,
		"-sizes", "500,1000,1500,2000", "-reps", "1"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	sh, err := shape.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// 2.5 × 600 ms at 20 ns·n² is about 8,660 events.
	if sh.LongEvents < 7500 || sh.LongEvents > 10000 || !strings.Contains(stdout.String(), "fitted baseline cost") {
		t.Fatalf("shape %+v\n%s", sh, stdout.String())
	}
}

func TestRunWritesAReportAndCompareReadsTwo(t *testing.T) {
	s := quadratic(t)
	dir := t.TempDir()
	shapeFile := filepath.Join(dir, "shape.json")
	shape.Shape{Rate: 40, LongEvery: 10, LongEvents: 6000, ShortMin: 5, ShortMax: 10, Seed: 1}.Save(shapeFile)
	for _, name := range []string{"baseline", "fixed"} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"-target", s.URL, "-tenants", "k1=a:5,k2=b:5", "-shape", shapeFile,
			"-duration", "500ms", "-admin", "", "-name", name, "-o", filepath.Join(dir, name+".json"), "-log-level", "error"}, &stdout, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout.String(), "burn") {
			t.Fatalf("report: %s", stdout.String())
		}
	}
	var table bytes.Buffer
	if err := run(context.Background(), []string{"compare", filepath.Join(dir, "baseline.json"), filepath.Join(dir, "fixed.json")}, &table, io.Discard); err != nil {
		t.Fatal(err)
	}
	// 20 streams, 2 of them long (6,000 events at 20 ns·n² = 720 ms).
	if !strings.Contains(table.String(), "Burn rate") || !strings.Contains(table.String(), "100.0×") {
		t.Fatalf("table:\n%s", table.String())
	}
}

func TestBadInvocations(t *testing.T) {
	for _, args := range [][]string{
		{"compare", "only-one.json"},
		{"compare", "missing-a.json", "missing-b.json"},
		{"-tenants", ""},
		{"-tenants", "k", "-target", "nowhere"},
		{"-tenants", "k", "-shape", "/dev/null"},
		{"calibrate", "-tenants", "k", "-sizes", "10,x"},
		{"-tenants", "k", "extra"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	t.Setenv("LOADGEN_RATE", "fast")
	if err := run(context.Background(), []string{"-tenants", "k"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "LOADGEN_RATE") {
		t.Errorf("bad env: %v", err)
	}
}
