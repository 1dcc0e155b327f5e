package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"burnlab/shared/pproftop"
)

func TestJSONReportHasBothPhases(t *testing.T) {
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"-streams", "6", "-events-min", "300", "-events-max", "500", "-workers", "2", "-json"}, &out, &errs)
	if err != nil {
		t.Fatal(err)
	}
	var phases []struct {
		Name       string  `json:"name"`
		P50        float64 `json:"p50_ms"`
		P99        float64 `json:"p99_ms"`
		BreachRate float64 `json:"breach_rate"`
		BurnRate   float64 `json:"burn_rate"`
		AllocBytes uint64  `json:"alloc_bytes"`
	}
	if err := json.Unmarshal(out.Bytes(), &phases); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(phases) != 2 || phases[0].Name != "baseline" || phases[1].Name != "fixed" || phases[0].AllocBytes <= phases[1].AllocBytes || phases[0].P99 < phases[0].P50 {
		t.Fatalf("%+v", phases)
	}
	if !strings.Contains(errs.String(), "GOMAXPROCS=") {
		t.Error("the environment must be printed with every result")
	}
}

// The write-up's profiling recipe: -profile-only writes an alloc_space
// profile whose top function is the baseline parser.
func TestProfileOnlyNamesTheBaselineParser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baseline.pprof")
	var out, errs bytes.Buffer
	args := []string{"-profile-only", "-workers=1", "-memprofile=" + path, "-profile-seconds=1s", "-events-min=2000", "-events-max=3000"}
	if err := run(context.Background(), args, &out, &errs); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, p, err := pproftop.Read(f, pproftop.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	top, _, err := pproftop.Top(p, "alloc_space", 1)
	if err != nil || !strings.HasSuffix(top[0].Function, "transcript.(*Baseline).Append") {
		t.Fatalf("top alloc_space: %+v %v", top, err)
	}
}

func TestBadFlagsAreClearErrors(t *testing.T) {
	for args, want := range map[string]string{
		"-profile-only":                "needs -memprofile",
		"-streams 0":                   "streams must be",
		"-events-min 10 -events-max 5": "below events-min",
		"-phase middle":                "unknown phase",
		"-workers 0 -streams 1 -events-min 1 -events-max 1": "workers must be",
		"extra":            "unexpected arguments",
		"-long-every 0":    "-long-every must be",
		"-ordinary-min -1": "must not be negative",
	} {
		var out, errs bytes.Buffer
		err := run(context.Background(), strings.Fields(args), &out, &errs)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
