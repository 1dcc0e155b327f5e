package promfacts

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/promfacts/promfactstest"
)

// The GC's figures are read over the burn window and as long a window
// before it, of the job named, each as its own query: the page says them
// in words, and a figure Prometheus lacks is n/a, never 0.
func TestGCReadsBeforeAndDuring(t *testing.T) {
	prom := promfactstest.New(t)
	burnFrom := start.Add(-4 * time.Minute)
	for part, v := range map[string][2]string{
		"go_cpu_classes_gc_total_cpu_seconds_total":       {"0.04", "0.61"},
		"go_cpu_classes_gc_mark_assist_cpu_seconds_total": {"0.01", "0.23"},
		"go_gc_cycles_total_gc_cycles_total":              {"0.4", "12.3"},
		"go_sched_pauses_total_gc_seconds_bucket":         {"0.0001", "0.0008"},
		"go_sched_latencies_seconds_bucket":               {"", "0.0091"},
	} {
		prom.SetBefore(part, burnFrom.Add(time.Second), v[0])
		prom.Set(part, v[1])
	}
	c, err := New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := c.GC(context.Background(), "gateway", burnFrom, start)
	if g.Error != "" {
		t.Fatalf("error %q", g.Error)
	}
	want := "GC took 61% of gateway's CPU during the burn (4% before); mark assist, which runs on the request goroutines, 23% (1% before); " +
		"12.3 GC cycles/s (0.4 before); stop-the-world pause p99 800 µs (100 µs before); scheduling latency p99 9.1 ms (n/a before)"
	if g.Words != want {
		t.Errorf("words\n got %q\nwant %q", g.Words, want)
	}
	b, _ := json.Marshal(g)
	for _, field := range []string{`"cpu_share_before":0.04`, `"cpu_share_during":0.61`, `"assist_share_before":0.01`, `"assist_share_during":0.23`, `"sched_latency_p99_seconds_before":null`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("the JSON lacks %s: %s", field, b)
		}
	}
	if !g.BeforeTo.Equal(burnFrom) || !g.BeforeFrom.Equal(burnFrom.Add(-4*time.Minute)) || !g.DuringTo.Equal(start) {
		t.Errorf("windows %s–%s and %s–%s, want the 4 minutes before the burn and the burn", g.BeforeFrom, g.BeforeTo, g.DuringFrom, g.DuringTo)
	}
	asked := prom.Asked()
	if len(asked) != 10 {
		t.Fatalf("%d queries, want 10 (five figures, before and during)", len(asked))
	}
	for _, a := range asked {
		if !strings.Contains(a.Query, `{job="gateway"}[4m]`) || (!a.Time.Equal(start) && !a.Time.Equal(burnFrom)) {
			t.Errorf("query %q at %s: want the gateway job over 4m, at the burn's start or the alert's", a.Query, a.Time)
		}
		if strings.Contains(a.Query, "_cpu_seconds_total") && !strings.Contains(a.Query, "/ sum(rate(process_cpu_seconds_total") {
			t.Errorf("a share not of the process's CPU: %s", a.Query)
		}
	}
}

func TestGCSaysWhatItCouldNotRead(t *testing.T) {
	prom := promfactstest.New(t)
	c, err := New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.GC(context.Background(), `gateway"}) or vector(1`, start.Add(-time.Minute), start); !strings.Contains(g.Error, "not a plain Prometheus job name") || len(prom.Asked()) != 0 {
		t.Errorf("a hostile job name: %q, %d queries sent", g.Error, len(prom.Asked()))
	}
	if g := c.GC(context.Background(), "gateway", time.Time{}, start); !strings.Contains(g.Error, "no burn window") {
		t.Errorf("no burn window: %q", g.Error)
	}
	if g := c.GC(context.Background(), "gateway", start.Add(-time.Minute), start); g.Error != "" || g.Words != "no GC figures for job gateway in Prometheus" {
		t.Errorf("no series: %q, %q", g.Error, g.Words)
	}
	prom.Close()
	if g := c.GC(context.Background(), "gateway", start.Add(-time.Minute), start); !strings.Contains(g.Error, "10 of 10 GC queries failed") {
		t.Errorf("Prometheus down: %q", g.Error)
	}
	var none *Client
	if g := none.GC(context.Background(), "gateway", start.Add(-time.Minute), start); !strings.Contains(g.Error, "without -prometheus-url") {
		t.Errorf("no Prometheus: %q", g.Error)
	}
}

// A share of a process that used no CPU before the burn is x/0, +Inf in
// Prometheus: no figure, never one JSON cannot encode (the journal lost a
// page's whole facts record to it in a fresh lab).
func TestGCTakesNoInfinity(t *testing.T) {
	prom := promfactstest.New(t)
	burnFrom := start.Add(-4 * time.Minute)
	prom.SetBefore("go_cpu_classes_gc_total", burnFrom.Add(time.Second), "+Inf")
	prom.Set("go_cpu_classes_gc_total", "0.38")
	prom.Set("go_sched_latencies_seconds_bucket", "-Inf")
	c, err := New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := c.GC(context.Background(), "gateway", burnFrom, start)
	if g.CPUShareBefore != nil || g.SchedLatencyP99During != nil || g.CPUShareDuring == nil || *g.CPUShareDuring != 0.38 {
		t.Errorf("before %v, sched %v, during %v: want no figure for an infinity", g.CPUShareBefore, g.SchedLatencyP99During, g.CPUShareDuring)
	}
	if _, err := json.Marshal(g); err != nil {
		t.Errorf("the figures do not encode: %v", err)
	}
}

// The after-view reads the two shares over the minute after the resolve,
// and says what it could not.
func TestGCAfterReadsTheMinuteBeforeTheResolve(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("go_cpu_classes_gc_total_cpu_seconds_total", "0.06")
	prom.Set("go_cpu_classes_gc_mark_assist_cpu_seconds_total", "0.004")
	c, err := New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := c.GCAfter(context.Background(), "gateway", start)
	if g.Error != "" || g.Words != "after the resolve GC took 6% of gateway's CPU, mark assist 0%" || !g.From.Equal(start) || !g.To.Equal(start.Add(time.Minute)) {
		t.Errorf("after: %+v", g)
	}
	asked := prom.Asked()
	if len(asked) != 2 {
		t.Fatalf("%d queries, want the two shares", len(asked))
	}
	for _, a := range asked {
		if !strings.Contains(a.Query, `{job="gateway"}[1m]`) || !a.Time.Equal(start.Add(time.Minute)) {
			t.Errorf("query %q at %s, want the job's minute after %s", a.Query, a.Time, start)
		}
	}
	if g := c.GCAfter(context.Background(), `a"} or vector(1`, start); !strings.Contains(g.Error, "not a plain Prometheus job name") {
		t.Errorf("a hostile job name: %q", g.Error)
	}
	prom.Close()
	if g := c.GCAfter(context.Background(), "gateway", start); !strings.Contains(g.Error, "2 of 2 GC queries failed") || !strings.Contains(g.Words, "no GC figures") {
		t.Errorf("Prometheus down: %+v", g)
	}
}
