package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"burnlab/loadgen/internal/shape"
)

// quadratic answers a stream of max_tokens events after 20 ns × n² — a
// stand-in for the baseline gateway's cost curve.
func quadratic(t *testing.T) *httptest.Server { return costly(t, 20) }

// costly answers a stream of max_tokens events after nsPerN2 × n²; 0 is
// the fixed build, whose cost does not grow with n².
func costly(t *testing.T, nsPerN2 float64) *httptest.Server {
	s, _ := costlyKeys(t, nsPerN2)
	return s
}

// costlyKeys is costly, and a function that lists the API key of every
// request it has answered, in order.
func costlyKeys(t *testing.T, nsPerN2 float64) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var keys []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		n := req.MaxTokens
		time.Sleep(time.Duration(nsPerN2 * float64(n) * float64(n)))
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"x"}}]}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(keys)
	}
}

// The server's quadratic cost is made to dominate what a busy machine adds
// to each stream: at 20 ns·n² and one run per size, the 2,000-event stream
// cost 80 ms, and under a loaded -race run the client's per-event work and
// late wake-ups were a linear term the fit took from n² (11,500 events, not
// 8,660). At 50 ns·n² it costs 200 ms, and the fastest of three runs per
// size drops the passing spikes, as the calibration does on a real gateway.
func TestCalibrateFitsAndWritesAShape(t *testing.T) {
	s := costly(t, 50)
	out := filepath.Join(t.TempDir(), "shape.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"calibrate", "-target", s.URL, "-tenants", "p=calibration:1:8:probe", "-o", out,
		"-sizes", "500,1000,1500,2000", "-reps", "3"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	sh, err := shape.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// 2.5 × 600 ms at 50 ns·n² is about 5,480 events.
	if sh.LongEvents < 4750 || sh.LongEvents > 6300 || !strings.Contains(stdout.String(), "fitted baseline cost") {
		t.Fatalf("shape %+v\n%s", sh, stdout.String())
	}
}

// Compose's loadgen fits the machine at its first start and keeps the
// shape; against the fixed build it runs the built-in shape and writes
// nothing, so a later start against the baseline still fits. Every
// calibration stream goes as the probe tenant, and no load stream does.
func TestRunCalibratesWhenTheShapeIsMissing(t *testing.T) {
	const tenants = "k=acme:1,p=calibration:1:8:probe"
	timed := 1 + 3*len(strings.Split(defaultSizes, ",")) // a warm-up, then three of each size
	for _, tc := range []struct {
		name    string
		nsPerN2 float64
		written bool
	}{{"baseline", 20, true}, {"fixed", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s, keys := costlyKeys(t, tc.nsPerN2)
			path := filepath.Join(t.TempDir(), "shape.json")
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"-calibrate", "-shape", path, "-target", s.URL, "-tenants", tenants,
				"-rate", "20", "-duration", "200ms", "-admin", "", "-log-level", "warn"}, &stdout, &stderr)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			sh, err := shape.Load(path)
			if (err == nil) != tc.written {
				t.Fatalf("shape file written = %v (%v), want %v\n%s", err == nil, err, tc.written, stderr.String())
			}
			if tc.written && !strings.Contains(strings.Join(sh.Why, " "), "fitted baseline cost") {
				t.Fatalf("not a calibrated shape: %+v", sh)
			}
			if !tc.written && !strings.Contains(stdout.String(), "measured") {
				t.Fatalf("no calibration was tried:\n%s", stdout.String())
			}
			sent := keys()
			if len(sent) <= timed || slices.ContainsFunc(sent[:timed], func(k string) bool { return k != "p" }) ||
				slices.ContainsFunc(sent[timed:], func(k string) bool { return k != "k" }) {
				t.Fatalf("keys sent %q: want %d calibration streams as the probe tenant (p), then load as acme (k) only", sent, timed)
			}
			// A second start reads the file and times nothing.
			stdout.Reset()
			if err := run(context.Background(), []string{"-calibrate", "-shape", path, "-target", s.URL, "-tenants", tenants,
				"-rate", "20", "-duration", "100ms", "-admin", "", "-log-level", "warn"}, &stdout, io.Discard); err != nil {
				t.Fatal(err)
			}
			if tc.written && strings.Contains(stdout.String(), "measured") {
				t.Fatalf("calibrated again though %s exists:\n%s", path, stdout.String())
			}
		})
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
		{"-tenants", "k,p=c:1:1:probe", "-calibrate"},
		{"-tenants", "k", "-start-delay", "-1s"},
		{"-tenants", "p=c:1:1:probe", "-admin", "", "-duration", "1ms"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	// A calibration with no probe tenant to send it as is refused before
	// any stream: its streams would count in the SLI.
	for _, args := range [][]string{
		{"calibrate", "-tenants", "k", "-target", "http://127.0.0.1:1/"},
		{"-tenants", "k=acme:5", "-calibrate", "-shape", filepath.Join(t.TempDir(), "s.json"), "-target", "http://127.0.0.1:1/"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); !errors.Is(err, errNoProbe) {
			t.Errorf("%q: %v, want the missing probe tenant said", args, err)
		}
	}
	t.Setenv("LOADGEN_RATE", "fast")
	if err := run(context.Background(), []string{"-tenants", "k"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "LOADGEN_RATE") {
		t.Errorf("bad env: %v", err)
	}
}

// run's Validate says every flag that is wrong, not only the first.
func TestRunValidateNamesEveryBadFlag(t *testing.T) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	var o runOptions
	o.register(fs)
	if err := fs.Parse([]string{"-calibrate", "-start-delay", "-1s", "-shard", "3/2", "-creep", "-1h", "-direct", "upstream:8081"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := o.Validate()
	for _, want := range []string{"-tenants", "-start-delay", "-calibrate needs -shape", "-shard", "-creep", "-direct"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to name %s", err, want)
		}
	}
}

// Two shards of an Indexed Job, each told only /2 and its completion
// index, send between them what one loadgen sends.
func TestShardsOfAJobSplitTheRun(t *testing.T) {
	s := costly(t, 0)
	dir := t.TempDir()
	shapeFile := filepath.Join(dir, "shape.json")
	shape.Shape{Rate: 40, LongEvery: 10, LongEvents: 50, ShortMin: 5, ShortMax: 10, Seed: 1}.Save(shapeFile)
	scheduled := 0
	for _, index := range []string{"0", "1"} {
		t.Setenv("JOB_COMPLETION_INDEX", index)
		t.Setenv("LOADGEN_SHARD", "/2")
		out := filepath.Join(dir, "shard"+index+".json")
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"-target", s.URL, "-tenants", "k", "-shape", shapeFile,
			"-duration", "500ms", "-admin", "", "-o", out, "-log-level", "error"}, &stdout, &stderr)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var rep struct {
			Shard     string `json:"shard"`
			Scheduled int    `json:"scheduled"`
		}
		b, _ := os.ReadFile(out)
		if err := json.Unmarshal(b, &rep); err != nil || rep.Shard != index+"/2" || !strings.Contains(stdout.String(), "shard      "+index+"/2") {
			t.Fatalf("shard %s: report %s (%v)\n%s", index, b, err, stdout.String())
		}
		scheduled += rep.Scheduled
	}
	if scheduled != 20 {
		t.Fatalf("the shards scheduled %d streams; one loadgen schedules 20 in 500 ms at 40/s", scheduled)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("LOADGEN_SHARD", "0/2")
	if err := run(context.Background(), []string{"-target", s.URL, "-tenants", "k", "-admin", ""}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "-shard") {
		t.Fatalf("shard 0/2 in the pod of index 1: %v", err)
	}
}

// -start-delay holds the load back, and a stop during it ends the run
// without a stream. (It comes after a calibration, so that the pager's
// heap profiles of the idle gateway are newer than the calibration's long
// streams; main.go's order is the whole of that.)
func TestStartDelayHoldsTheLoadBack(t *testing.T) {
	var probe, load atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer p" {
			probe.Add(1)
		} else {
			load.Add(1)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := run(ctx, []string{"-tenants", "k,p=calibration:1:8:probe", "-target", srv.URL, "-start-delay", "1h", "-admin", ""}, io.Discard, io.Discard)
	if err != nil || load.Load() != 0 || probe.Load() != 0 {
		t.Errorf("stopped during the delay: %v, %d load and %d probe requests; want nil and none", err, load.Load(), probe.Load())
	}
}
