package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSynthEventsAreSeededAndInRange(t *testing.T) {
	tr := Traffic{Streams: 3, EventsMin: 50, EventsMax: 80, Seed: 7}
	a, b := tr.SynthEvents(1), tr.SynthEvents(1)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatal("the same seed must replay the same stream")
	}
	if strings.Join(a, "") == strings.Join(tr.SynthEvents(2), "") {
		t.Fatal("streams of one traffic must differ")
	}
	if len(a) < 50 || len(a) > 80 {
		t.Fatalf("%d events, want 50–80", len(a))
	}
	for _, e := range a {
		p, ok := strings.CutPrefix(e, "data: ")
		if !ok || len(p) < minPayload || len(p) > maxPayload {
			t.Fatalf("event %q: payload of %d characters, want 24–96", e, len(p))
		}
	}
}

func TestRunMeasuresBothPhasesOnTheSameTraffic(t *testing.T) {
	tr := Traffic{Streams: 20, EventsMin: 200, EventsMax: 400, Seed: 1}
	var results []Result
	for _, p := range Phases {
		r, err := Run(context.Background(), p, tr, 2)
		if err != nil {
			t.Fatal(err)
		}
		if r.Streams != 20 || len(r.Durations) != 20 || r.P99MS < r.P50MS || r.AllocBytes == 0 {
			t.Fatalf("%s: %+v", p.Name, r)
		}
		results = append(results, r)
	}
	// Allocation is deterministic where time is not: the baseline's
	// quadratic copying dwarfs the fixed parser's one buffer a stream.
	if results[0].AllocBytes < 10*results[1].AllocBytes {
		t.Errorf("baseline allocated %d bytes, fixed %d: want ≥10x", results[0].AllocBytes, results[1].AllocBytes)
	}
	var text, js bytes.Buffer
	if err := WriteText(&text, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Metric", "p50 latency", "p99 latency", "SLO breach rate", "Burn rate", "Allocations"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	WriteJSON(&js, results)
	var decoded []map[string]any
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "p50_ms", "p99_ms", "breach_rate", "burn_rate", "alloc_bytes"} {
		if _, ok := decoded[0][k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, js.String())
		}
	}
}

func TestBudgetStopsStartingStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r, err := Run(ctx, Phases[0], Traffic{Streams: 1000, EventsMin: 3000, EventsMax: 3000, Seed: 1}, 1)
	if !errors.Is(err, ErrBudget) || r.Streams == 0 || r.Streams >= 1000 {
		t.Fatalf("streams=%d err=%v", r.Streams, err)
	}
}

func TestQuantileAndValidation(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	if Quantile(ds, 0.99) != 99 || Quantile(ds, 0.5) != 50 || Quantile(ds, 1) != 100 || Quantile(nil, 0.5) != 0 {
		t.Fatal("nearest-rank quantiles are off")
	}
	for _, tr := range []Traffic{{Streams: 0, EventsMin: 1, EventsMax: 1}, {Streams: 1, EventsMin: 0, EventsMax: 1}, {Streams: 1, EventsMin: 5, EventsMax: 4}} {
		if _, err := Run(context.Background(), Phases[1], tr, 1); err == nil {
			t.Errorf("%+v accepted", tr)
		}
	}
	if _, err := PhaseByName("nope"); err == nil {
		t.Error("unknown phase accepted")
	}
}

// The fit recovers a quadratic cost exactly and solves it for the target.
func TestFitSquare(t *testing.T) {
	const a = 15 // ns per event²
	ns := []int{1000, 2000, 4000}
	var ts []time.Duration
	for _, n := range ns {
		ts = append(ts, time.Duration(a*n*n))
	}
	// a·n² = 1.5 s: n = sqrt(1.5e9/15) = 10,000.
	if got := FitSquare(ns, ts).Events(1500 * time.Millisecond); got != 10000 {
		t.Errorf("FitSquare(...).Events = %d, want 10000", got)
	}
	if got := FitSquare(ns, []time.Duration{0, 0, 0}).Events(time.Second); got != maxLongEvents {
		t.Errorf("a parser too fast to time: Events = %d, want the bound %d", got, maxLongEvents)
	}
}

// The last stream of every LongEvery is the long generation, and only it.
func TestLongGenerations(t *testing.T) {
	tr := Traffic{Streams: 300, EventsMin: 30, EventsMax: 40, LongEvery: 100, LongEvents: 500, Seed: 1}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := range tr.Streams {
		n := len(tr.SynthEvents(i))
		if long := i%100 == 99; long != (n == 500) || (!long && (n < 30 || n > 40)) {
			t.Fatalf("stream %d has %d events", i, n)
		}
	}
	if err := (Traffic{Streams: 1, EventsMin: 1, EventsMax: 1, LongEvery: 10}).Validate(); err == nil {
		t.Error("a long generation of no events was accepted")
	}
}
