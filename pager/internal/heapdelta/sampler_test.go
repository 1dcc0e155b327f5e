package heapdelta

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"burnlab/shared/pproftop/pproftoptest"
)

// fakeClock is a clock that moves only when told: by a fake gateway that
// spends a delta's seconds, or by Sleep, which returns at once having
// moved it on. stopAfter sleeps, it ends the run instead.
type fakeClock struct {
	mu        sync.Mutex
	now       time.Time
	sleeps    []time.Duration
	stopAfter int
	stop      context.CancelFunc
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	if len(c.sleeps) == c.stopAfter {
		c.stop()
	}
	c.mu.Unlock()
	return ctx.Err()
}

var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

func counts(s *Sampler) (ok, failed float64) {
	return testutil.ToFloat64(s.results.WithLabelValues("ok")), testutil.ToFloat64(s.results.WithLabelValues("error"))
}

// Run takes a delta at once, the next Every after the last one started,
// and after a failure waits min(Every, 5 s); it keeps the newest Keep
// good ones, and asks each time for seconds=Seconds on top of the URL's
// own query.
func TestRunCadenceRetriesAndRing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := &fakeClock{now: t0, stopAfter: 6, stop: cancel}
	script := []string{"ok", "ok", "500", "ok", "garbage", "ok"}
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		step := script[len(queries)]
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		switch step {
		case "ok":
			clk.advance(10 * time.Second) // the gateway's wait between its two snapshots
			w.Write(deltaProfile(t, 10, map[string]float64{copyFn: 1 * MB}))
		case "500":
			http.Error(w, "failed to collect profile", http.StatusInternalServerError)
		default:
			w.Write([]byte("not a profile"))
		}
	}))
	defer srv.Close()
	s := New(Config{URL: srv.URL + "/debug/pprof/allocs?debug=0", Keep: 3}, prometheus.NewRegistry())
	s.clock = clk

	s.Run(ctx)

	if len(queries) != len(script) {
		t.Fatalf("%d fetches, want %d", len(queries), len(script))
	}
	for i, q := range queries {
		if q != "debug=0&seconds=10" {
			t.Errorf("fetch %d asked for %q, want the URL's debug=0 and seconds=10", i, q)
		}
	}
	// ok: the next starts 30 s after this one started, 20 s after it
	// ended; a failure: 5 s after it.
	want := []time.Duration{20 * time.Second, 20 * time.Second, 5 * time.Second, 20 * time.Second, 5 * time.Second, 20 * time.Second}
	if fmt.Sprint(clk.sleeps) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", clk.sleeps, want)
	}
	// Deltas started at 0, 30 s, 65 s and 100 s; the oldest one is dropped.
	got := s.Samples()
	var windows []string
	for _, smp := range got {
		windows = append(windows, fmt.Sprintf("%s-%s", smp.From.Sub(t0), smp.To.Sub(t0)))
		if smp.Total != 10*MB || len(smp.Raw) == 0 {
			t.Errorf("sample %s: total %d, %d raw bytes; want 10 MB, the profile", windows[len(windows)-1], smp.Total, len(smp.Raw))
		}
	}
	if w := "[30s-40s 1m5s-1m15s 1m40s-1m50s]"; fmt.Sprint(windows) != w {
		t.Errorf("kept %v, want %s", windows, w)
	}
	if ok, failed := counts(s); ok != 4 || failed != 2 {
		t.Errorf("pager_delta_profiles_total ok %v error %v, want 4 and 2", ok, failed)
	}
	if n := testutil.CollectAndCount(s.seconds); n != 1 {
		t.Errorf("%d fetch-seconds histograms, want 1", n)
	}
}

// When Every is under RetryAfter, a failure is retried after Every.
func TestRunRetriesAfterEveryWhenShorter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := &fakeClock{now: t0, stopAfter: 1, stop: cancel}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	s := New(Config{URL: srv.URL, Seconds: 1, Every: 3 * time.Second}, prometheus.NewRegistry())
	s.clock = clk
	s.Run(ctx)
	if len(clk.sleeps) != 1 || clk.sleeps[0] != 3*time.Second {
		t.Errorf("waits %v after a failure, want [3s]", clk.sleeps)
	}
}

// A failed fetch, whatever failed, is an error that says what, is counted
// and is not kept.
func TestFetchFailuresAreNotKept(t *testing.T) {
	good := deltaProfile(t, 10, map[string]float64{copyFn: 1 * MB})
	cumulative := deltaProfile(t, 0, map[string]float64{copyFn: 1 * MB})
	bomb := pproftoptest.Bomb(t, 64<<20)
	// A profile with a duration but no alloc_space, as a CPU profile is.
	var cpu bytes.Buffer
	if err := (&profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DurationNanos: 1e10,
	}).Write(&cpu); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		serve   func(w http.ResponseWriter, r *http.Request)
		setup   func(s *Sampler)
		wantErr string
	}{
		{"a 500", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "failed to collect profile", http.StatusInternalServerError)
		}, nil, "500 Internal Server Error: failed to collect profile"},
		{"garbage", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }, nil, "pproftop:"},
		{"an empty body", func(w http.ResponseWriter, r *http.Request) {}, nil, "pproftop:"},
		{"over MaxBytes", func(w http.ResponseWriter, r *http.Request) { w.Write(good) },
			func(s *Sampler) { s.cfg.MaxBytes = int64(len(good) - 1) }, "profile too large"},
		// 64 MiB of zeros in 64 KiB of gzip: refused once 1 MiB is
		// inflated, not parsed whole.
		{"a decompression bomb", func(w http.ResponseWriter, r *http.Request) { w.Write(bomb) },
			func(s *Sampler) { s.cfg.MaxBytes = 1 << 20 }, "inflate to over 1048576 bytes"},
		{"a cumulative profile", func(w http.ResponseWriter, r *http.Request) { w.Write(cumulative) }, nil, "not a delta"},
		{"a CPU profile", func(w http.ResponseWriter, r *http.Request) { w.Write(cpu.Bytes()) }, nil, `no "alloc_space" samples`},
		{"a timeout", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			// Shorter than Seconds, which New refuses: the tests' gateway
			// answers without waiting them.
			func(s *Sampler) { s.cfg.Timeout = 50 * time.Millisecond }, "context deadline exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(c.serve))
			defer srv.Close()
			s := New(Config{URL: srv.URL}, prometheus.NewRegistry())
			if c.setup != nil {
				c.setup(s)
			}
			err := s.take(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one saying %q", err, c.wantErr)
			}
			if got := s.Samples(); len(got) != 0 {
				t.Errorf("kept %d samples of a failed fetch", len(got))
			}
			if ok, failed := counts(s); ok != 0 || failed != 1 {
				t.Errorf("counted ok %v error %v, want 0 and 1", ok, failed)
			}
		})
	}
}

// A fetch cut short by the pager stopping ends Run, and is not counted as
// the gateway failing.
func TestRunStopsWithItsContext(t *testing.T) {
	entered := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	}))
	defer srv.Close()
	s := New(Config{URL: srv.URL}, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	<-entered
	cancel()
	<-done
	if ok, failed := counts(s); ok != 0 || failed != 0 {
		t.Errorf("counted ok %v error %v for a fetch the pager cut short, want none", ok, failed)
	}
}

// Samples may be read while deltas are taken, and returns a copy.
func TestSamplesWhileTaking(t *testing.T) {
	raw := deltaProfile(t, 10, map[string]float64{copyFn: 1 * MB})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(raw) }))
	defer srv.Close()
	s := New(Config{URL: srv.URL, Keep: 5}, prometheus.NewRegistry())
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			if err := s.take(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for range 200 {
			if got := s.Samples(); len(got) > 5 {
				t.Errorf("%d samples held, want at most Keep 5", len(got))
			}
		}
	})
	wg.Wait()
	got := s.Samples()
	got[0] = Sample{}
	if s.Samples()[0].Total == 0 {
		t.Error("changing what Samples returned changed the sampler's")
	}
}

func TestConfigDefaultsAndLimits(t *testing.T) {
	c := Config{URL: "http://gateway:6060/debug/pprof/allocs"}.withDefaults()
	if c.Seconds != 10 || c.Every != 30*time.Second || c.Keep != 40 || c.Timeout != 25*time.Second || c.MaxBytes != 64<<20 || c.Client == nil {
		t.Errorf("defaults %+v", c)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "http://g/allocs"}, ""},
		{Config{URL: "http://g/allocs", Seconds: 10, Every: 10 * time.Second}, "every 10s"},
		{Config{URL: "http://g/allocs", Seconds: 61, Every: time.Hour}, "seconds 61"},
		{Config{URL: "http://g/allocs", Seconds: -1}, "seconds -1"},
		{Config{URL: "http://g/allocs", Keep: -1}, "keep -1"},
		{Config{URL: "http://g/allocs", Timeout: 10 * time.Second}, "timeout 10s"},
		{Config{URL: "http://g/allocs", MaxBytes: -1}, "max bytes -1"},
		{Config{URL: "gateway:6060/debug/pprof/allocs"}, "want http(s)://"},
		{Config{URL: ""}, "want http(s)://"},
	} {
		err := c.cfg.Validate()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New took a Config Validate rejects")
		}
	}()
	New(Config{URL: "http://g/allocs", Seconds: 10, Every: 5 * time.Second}, prometheus.NewRegistry())
}

// A real delta of this process, served by net/http/pprof: one taken while
// idle, one while a known function allocates, name that function.
func TestRealDeltaNamesTheAllocator(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof/allocs", pprof.Handler("allocs"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s := New(Config{URL: srv.URL + "/debug/pprof/allocs", Seconds: 1, Every: 2 * time.Second}, prometheus.NewRegistry())
	if err := s.take(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				pproftoptest.AllocateLikeTheBaseline()
			}
		}
	})
	err := s.take(context.Background())
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	got := s.Samples()
	v, err := Compare(got[0], got[1], DefaultThreshold)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Changed || !strings.HasSuffix(v.Function, pproftoptest.Allocator) {
		t.Fatalf("verdict %+v, want %s named", v, pproftoptest.Allocator)
	}
	t.Log(v.Words)
}

// With a CountsURL, each delta carries what the gateway forwarded while it
// was taken, from the gateway's own counters read before and after it; a
// /metrics that fails, hangs or lacks the series leaves the delta without
// them, kept all the same.
func TestDeltasCarryWhatTheGatewayForwardedInThem(t *testing.T) {
	var mu sync.Mutex
	sumN, metrics := 1000.0, "ok"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/metrics" {
			switch metrics {
			case "ok":
				fmt.Fprintf(w, "# TYPE %[1]s counter\n%[1]s %[2]g\n# TYPE %[3]s counter\n%[3]s %[4]g\n# TYPE gateway_stream_length_events histogram\ngateway_stream_length_events_bucket{le=\"+Inf\"} 3\ngateway_stream_length_events_sum 99\ngateway_stream_length_events_count 3\n",
					EventsCounter, sumN, EventPlaces, sumN*sumN)
			case "missing":
				fmt.Fprintln(w, "# TYPE other_total counter\nother_total 1")
			case "hanging":
				mu.Unlock()
				<-r.Context().Done() // past countsTimeout
				mu.Lock()
			default:
				http.Error(w, "no", http.StatusInternalServerError)
			}
			return
		}
		sumN += 500 // events forwarded during the delta
		w.Write(deltaProfile(t, 1, map[string]float64{copyFn: 1 * MB}))
	}))
	defer srv.Close()
	s := New(Config{URL: srv.URL + "/debug/pprof/allocs", Seconds: 1, Every: 2 * time.Second, CountsURL: CountsURL(srv.URL + "/debug/pprof/allocs")},
		prometheus.NewRegistry())
	for _, m := range []string{"ok", "missing", "failing", "hanging"} {
		mu.Lock()
		metrics = m
		mu.Unlock()
		if err := s.take(context.Background()); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	got := s.Samples()
	if len(got) != 4 {
		t.Fatalf("%d deltas kept, want 4", len(got))
	}
	if l := got[0].Lengths; l == nil || l.SumN != 500 || l.SumN2 != 1500*1500-1000*1000 {
		t.Errorf("the deltas' streams: %+v, want Σn 500, Σn² %g", l, 1500.0*1500-1000*1000)
	}
	for i, m := range []string{"missing", "failing", "hanging"} {
		if l := got[i+1].Lengths; l != nil {
			t.Errorf("a /metrics %s gave the delta streams: %+v", m, l)
		}
	}
	if CountsURL("http://gateway:6060/debug/pprof/allocs?seconds=10") != "http://gateway:6060/metrics" || CountsURL("no url") != "" {
		t.Error("CountsURL is not the profile's listener's /metrics")
	}
	if err := (Config{URL: "http://g/allocs", CountsURL: "gateway:6060"}).Validate(); err == nil {
		t.Error("a counts URL with no scheme validates")
	}
}

// With Processes, each delta is of every process the rule names, taken at
// once and merged: the replicas' functions and bytes add up, and so do the
// streams each forwarded. A delta one replica failed is not kept: merged
// from fewer processes than the next, it would read as a change.
func TestDeltasOfSeveralProcessesAreMerged(t *testing.T) {
	replica := func(fn string, rate, events float64, fail *atomic.Bool) *httptest.Server {
		var mu sync.Mutex
		sumN := 0.0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.URL.Path == "/metrics" {
				fmt.Fprintf(w, "# TYPE %[1]s counter\n%[1]s %[2]g\n# TYPE %[3]s counter\n%[3]s %[4]g\n", EventsCounter, sumN, EventPlaces, sumN*sumN)
				return
			}
			if r.URL.Query().Get("seconds") != "1" || fail.Load() {
				http.Error(w, "no", http.StatusInternalServerError)
				return
			}
			sumN += events
			w.Write(deltaProfile(t, 1, map[string]float64{fn: rate}))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	var ok, failing atomic.Bool
	a, b := replica(appendFn, 3*MB, 100, &ok), replica(copyFn, 1*MB, 50, &failing)
	asked := 0
	s := New(Config{Seconds: 1, Every: 2 * time.Second, Processes: func(context.Context) ([]string, error) {
		asked++
		return []string{a.URL + "/debug/pprof/allocs", b.URL + "/debug/pprof/allocs"}, nil
	}}, prometheus.NewRegistry())
	if err := s.take(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := s.Samples()
	if len(got) != 1 || asked != 1 {
		t.Fatalf("%d deltas, processes asked %d times", len(got), asked)
	}
	p, err := profile.ParseData(got[0].Raw)
	if err != nil {
		t.Fatal(err)
	}
	fns := map[string]bool{}
	for _, f := range p.Function {
		fns[f.Name] = true
	}
	if !fns[appendFn] || !fns[copyFn] || got[0].Total != 4*MB {
		t.Errorf("the merged delta: functions %v, %d bytes; want both replicas', 4 MB", fns, got[0].Total)
	}
	if l := got[0].Lengths; l == nil || l.SumN != 150 {
		t.Errorf("the merged delta's streams: %+v, want Σn 100 + 50", l)
	}
	failing.Store(true)
	if err := s.take(context.Background()); err == nil || len(s.Samples()) != 1 {
		t.Errorf("a delta one replica failed: %v, %d kept", err, len(s.Samples()))
	}
	// One replica gone: the history starts again, or the next verdict
	// would compare one replica's allocation with two's.
	takes := 0
	one := New(Config{Seconds: 1, Every: 2 * time.Second, Processes: func(context.Context) ([]string, error) {
		if takes++; takes == 3 {
			return []string{a.URL + "/debug/pprof/allocs"}, nil
		}
		return []string{a.URL + "/debug/pprof/allocs", a.URL + "/debug/pprof/allocs?again"}, nil
	}}, prometheus.NewRegistry())
	for range 3 {
		if err := one.take(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := one.Samples(); len(got) != 1 || len(got[0].Processes) != 1 {
		t.Errorf("after a replica went: %d deltas kept, the newest of %v; want only the one after", len(got), got[len(got)-1].Processes)
	}
}

// A process that redirects the sampler is refused, not followed: with
// Processes, any scraped target could otherwise point it anywhere.
func TestARedirectingProcessIsRefused(t *testing.T) {
	var followed atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Store(true) }))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/latest/meta-data", http.StatusFound))
	defer srv.Close()
	s := New(Config{Seconds: 1, Every: 2 * time.Second, Processes: func(context.Context) ([]string, error) {
		return []string{srv.URL + "/debug/pprof/allocs"}, nil
	}}, prometheus.NewRegistry())
	if err := s.take(context.Background()); err == nil || !strings.Contains(err.Error(), "302") || followed.Load() {
		t.Errorf("a redirect: %v, followed %v", err, followed.Load())
	}
}
