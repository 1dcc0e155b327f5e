package load

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"burnlab/loadgen/internal/shape"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sse answers every request with n events and [DONE] after delay(i) for
// the i-th request.
func sse(delay func(i int64) time.Duration) (*httptest.Server, *atomic.Int64) {
	var count atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := count.Add(1)
		// net/http notices a client hanging up only once the body is read.
		io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(delay(i)):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for range 3 {
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"hi"}}]}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	return s, &count
}

func quick() shape.Shape {
	return shape.Shape{Rate: 50, LongEvery: 0, ShortMin: 3, ShortMax: 3, Seed: 1}
}

func TestOpenModelKeepsTheScheduleAndCountsEveryStart(t *testing.T) {
	s, count := sse(func(int64) time.Duration { return 0 })
	defer s.Close()
	rec := NewRecorder(prometheus.NewRegistry())
	err := Run(context.Background(), Config{Target: s.URL, Keys: []string{"k"}, Shape: quick(), Duration: time.Second, MaxInFlight: 10}, rec)
	if err != nil {
		t.Fatal(err)
	}
	snap := rec.Snapshot()
	if snap.Scheduled != 50 || snap.OK != 50 || count.Load() != 50 || snap.Breaches != 0 {
		t.Fatalf("%+v, server saw %d: want 50 starts in 1 s at 50/s", snap, count.Load())
	}
}

// A server that stalls for 1 s holds up every stream scheduled during the
// stall. Timing from the scheduled start shows it in the p99; a closed-loop
// client that waited for each answer before starting the next would have
// sent fewer streams and hidden it. The server counts what it did: a stream
// it held over 600 ms must be a breach, and one it did not hold cannot be.
// (A fixed band of 15–25 breaches, the 20 streams of the stall's first 0.4
// s, failed on a loaded machine: streams scheduled before the stall but sent
// late joined it, and breached, as they would in production.)
func TestAStalledServerShowsInThePercentiles(t *testing.T) {
	stallFrom := time.Now().Add(400 * time.Millisecond)
	stallTo := stallFrom.Add(time.Second)
	var held, heldOver atomic.Int64
	s, _ := sse(func(int64) time.Duration {
		if now := time.Now(); now.After(stallFrom) && now.Before(stallTo) {
			wait := stallTo.Sub(now) // every request in the stall waits for its end
			held.Add(1)
			if wait > 600*time.Millisecond {
				heldOver.Add(1)
			}
			return wait
		}
		return 0
	})
	defer s.Close()
	rec := NewRecorder(prometheus.NewRegistry())
	if err := Run(context.Background(), Config{Target: s.URL, Keys: []string{"k"}, Shape: quick(), Duration: 2 * time.Second, MaxInFlight: 200}, rec); err != nil {
		t.Fatal(err)
	}
	rep := rec.Report("stall", s.URL, time.Now(), 2*time.Second, quick(), 200)
	if rep.Scheduled != 100 || rep.Dropped != 0 {
		t.Fatalf("scheduled %d dropped %d: the schedule must not wait for the server", rep.Scheduled, rep.Dropped)
	}
	// About 50 streams reach the server in the 1 s stall; about 20, in its
	// first 0.4 s, are held past 600 ms. Fewer than 10 is no stall to test.
	if heldOver.Load() < 10 {
		t.Fatalf("the server held only %d streams over 600 ms (%d in all): the stall missed the run", heldOver.Load(), held.Load())
	}
	if rep.Duration.P99 < 600 || int64(rep.Breaches) < heldOver.Load() || int64(rep.Breaches) > held.Load() {
		t.Fatalf("p50 %.0f ms p99 %.0f ms, %d breaches; the server held %d streams, %d of them over 600 ms: the stall is hidden or misplaced",
			rep.Duration.P50, rep.Duration.P99, rep.Breaches, held.Load(), heldOver.Load())
	}
}

func TestMaxInFlightDropsAndCounts(t *testing.T) {
	s, _ := sse(func(int64) time.Duration { return 500 * time.Millisecond })
	defer s.Close()
	reg := prometheus.NewRegistry()
	rec := NewRecorder(reg)
	if err := Run(context.Background(), Config{Target: s.URL, Keys: []string{"k"}, Shape: quick(), Duration: 400 * time.Millisecond, MaxInFlight: 5}, rec); err != nil {
		t.Fatal(err)
	}
	snap := rec.Snapshot()
	if snap.Scheduled != 20 || snap.Dropped != 15 || snap.OK != 5 {
		t.Fatalf("%+v: want 20 scheduled, 5 run, 15 dropped", snap)
	}
	if got := testutil.ToFloat64(rec.mDropped); got != 15 {
		t.Fatalf("loadgen_dropped_starts_total = %v", got)
	}
}

func TestOutcomesOfFailingStreams(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		OutcomeRejected: func(w http.ResponseWriter, r *http.Request) { http.Error(w, `{"error":{}}`, 429) },
		OutcomeHTTP5xx:  func(w http.ResponseWriter, r *http.Request) { http.Error(w, `{"error":{}}`, 502) },
		OutcomeStreamError: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[]}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n")
		},
		OutcomeTruncated: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[]}\n\n")
		},
	}
	for want, h := range cases {
		s := httptest.NewServer(h)
		r := Once(context.Background(), s.Client(), s.URL, "k", 5)
		s.Close()
		if r.Outcome != want {
			t.Errorf("got %s (%s), want %s", r.Outcome, r.Err, want)
		}
	}
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close()
	if r := Once(context.Background(), http.DefaultClient, url, "k", 5); r.Outcome != OutcomeConnectError {
		t.Errorf("closed port: %s (%s)", r.Outcome, r.Err)
	}
}

func TestStreamTimeout(t *testing.T) {
	s, _ := sse(func(int64) time.Duration { return time.Hour })
	defer s.Close()
	rec := NewRecorder(prometheus.NewRegistry())
	Run(context.Background(), Config{Target: s.URL, Keys: []string{"k"}, Shape: shape.Shape{Rate: 10, ShortMin: 1, ShortMax: 1},
		Duration: 100 * time.Millisecond, MaxInFlight: 5, Timeout: 200 * time.Millisecond}, rec)
	rep := rec.Report("", "", time.Now(), time.Second, quick(), 5)
	if rep.Outcomes[OutcomeTimeout] != 1 || rep.Breaches != 1 {
		t.Fatalf("outcomes %v breaches %d", rep.Outcomes, rep.Breaches)
	}
}

func TestReportRoundTripAndCompare(t *testing.T) {
	rec := NewRecorder(prometheus.NewRegistry())
	for i := range 100 {
		d := 20 * time.Millisecond
		if i == 50 {
			d = 2 * time.Second
		}
		rec.started()
		rec.record(Result{Outcome: OutcomeOK, Duration: d, TTFT: time.Millisecond, Events: 10, Long: i == 50})
	}
	rec.started()
	rec.record(Result{Outcome: OutcomeRejected, Err: "429 quota"})
	base := rec.Report("baseline", "http://x", time.Now(), 10*time.Second, shape.Default(), 10)
	if base.Counted != 100 || base.Breaches != 1 || base.BurnRate < 9.99 || base.BurnRate > 10.01 || base.LongBreach != 1 {
		t.Fatalf("%+v", base)
	}
	var text bytes.Buffer
	base.WriteText(&text)
	for _, want := range []string{"p99.9", "burn 10.0x", "rejected=1", "dropped", "429 quota"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "b.json")
	if err := base.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(path)
	if err != nil || back.BurnRate != base.BurnRate || back.Duration != base.Duration {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	fixed := base
	fixed.Name, fixed.Breaches, fixed.BreachRate, fixed.BurnRate = "fixed", 0, 0, 0
	fixed.Duration.P50, fixed.Duration.P99 = 0.02, 0.05
	var table bytes.Buffer
	if err := Compare(&table, back, fixed); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Metric", "Baseline", "Fixed", "Burn rate", "10.0×", "no page"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if _, err := ReadReport(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing report accepted")
	}
}

func TestKeysAndValidation(t *testing.T) {
	for in, want := range map[string]Keys{
		"a,b":                                 {Load: []string{"a", "b"}},
		"a=x:1, b=y:2":                        {Load: []string{"a", "b"}},
		" a ,":                                {Load: []string{"a"}},
		"a=x:1:2,p=c:1:8:probe,q=c:1:8:probe": {Load: []string{"a"}, Probe: "p"},
		"p=c:1:8:probe,a":                     {Load: []string{"a"}, Probe: "p"},
	} {
		keys, err := ParseKeys(in)
		if err != nil || !slices.Equal(keys.Load, want.Load) || keys.Probe != want.Probe {
			t.Errorf("ParseKeys(%q) = %+v %v, want %+v", in, keys, err, want)
		}
	}
	if _, err := ParseKeys(" , "); err == nil {
		t.Error("no keys accepted")
	}
	for _, c := range []Config{
		{Target: "nowhere", Keys: []string{"k"}, Shape: quick(), MaxInFlight: 1},
		{Target: "http://x/", Shape: quick(), MaxInFlight: 1},
		{Target: "http://x/", Keys: []string{"k"}, Shape: quick()},
		{Target: "http://x/", Keys: []string{"k"}, Shape: shape.Shape{}, MaxInFlight: 1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestRampStartsSlowly(t *testing.T) {
	// 10/s ramped over 2 s: 10 starts during the ramp (a quarter of them
	// in its first second), then 10 a second.
	for _, c := range []struct {
		i    int
		want time.Duration
	}{{0, 0}, {2, time.Duration(float64(time.Second) * 0.894427191)}, {10, 2 * time.Second}, {20, 3 * time.Second}} {
		if d := offset(c.i, 10, 2*time.Second); (d - c.want).Abs() > time.Millisecond {
			t.Errorf("offset(%d) = %s, want %s", c.i, d, c.want)
		}
	}
	if d := offset(5, 10, 0); d != 500*time.Millisecond {
		t.Fatalf("offset without ramp = %s", d)
	}
}
