// Package heapdelta keeps a small rolling set of short delta heap profiles
// of the gateway and says in words how the one taken during a burn differs
// from one taken before it.
//
// A delta profile is what Go's net/http/pprof serves for
// `/debug/pprof/allocs?seconds=N`: it takes two heap profiles N seconds
// apart and subtracts them, so the result counts only the allocations made
// in those N seconds. The pager's cumulative profile (allocations since the
// gateway's process started) answers "what allocates most, ever"; a pair of
// deltas answers "what changed", which is what an on-call asks at a page.
//
// Two things bound how exactly a delta covers its window. The runtime
// publishes its heap profile as of a completed garbage collection, so each
// of the two snapshots lags by up to a GC cycle (a fraction of a second on
// a busy gateway; on an idle one nothing is allocated anyway). And the
// runtime records one allocation per 512 KiB allocated, on average, and
// scales it up, so a function's figure is an estimate whose error shrinks
// with the bytes it allocates; Compare's thresholds are set against that
// noise.
//
// By concern: sampler.go fetches and keeps the deltas (Sampler); verdict.go
// picks the pair around a burn (Pick) and compares it (Compare).
package heapdelta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/shared/pproftop"
)

// The defaults of Config.
const (
	// DefaultSeconds is one delta's length: long enough that a busy
	// gateway's delta holds hundreds of the runtime's allocation samples
	// (one per 512 KiB), short enough that a pair of deltas fits around
	// the start of a burn.
	DefaultSeconds = 10
	// DefaultEvery starts a delta every 30 s, so the gateway spends a
	// third of its time with a delta open, and the pager always holds one
	// that ended less than 30 s before any moment.
	DefaultEvery = 30 * time.Second
	// DefaultKeep holds 20 minutes of deltas at DefaultEvery: enough to
	// reach back before a burn that a fast-burn alert needed minutes to
	// confirm.
	DefaultKeep = 40
	// DefaultMaxBytes bounds the profile read, and what it inflates to
	// (pproftop.Read). A gateway's delta is some tens of KB.
	DefaultMaxBytes = pproftop.MaxBytes
	// MaxSeconds bounds Seconds well under the gateway admin server's
	// 2-minute WriteTimeout (shared/service/serve.go): older Go versions
	// of net/http/pprof refuse a delta longer than the WriteTimeout, and
	// a delta as long as a burn cannot show a before and an after.
	MaxSeconds = 60
)

// RetryAfter is the longest wait after a failed fetch (the wait is
// min(Every, RetryAfter)): soon enough that a gateway back from a restart
// is sampled again within seconds, slow enough that a dead one is asked
// only a dozen times a minute.
const RetryAfter = 5 * time.Second

// Config says where and how often the Sampler takes its deltas.
type Config struct {
	// URL is the allocs endpoint, without the seconds query (e.g.
	// http://gateway:6060/debug/pprof/allocs). seconds=Seconds is added
	// to whatever query it already has.
	URL string
	// Seconds is the length of one delta (default DefaultSeconds, at most
	// MaxSeconds).
	Seconds int
	// Every is the time between the starts of two deltas (default
	// DefaultEvery); it must be longer than Seconds, so at most one delta
	// is open on the gateway at a time.
	Every time.Duration
	// Keep is how many deltas are kept, the newest (default DefaultKeep).
	Keep int
	// CountsURL is the gateway's /metrics, read just before and after
	// each delta for what the gateway forwarded in its window (Lengths;
	// CountsURL gives the one beside a delta URL); empty: none read.
	CountsURL string
	// Client fetches the profiles (default a new http.Client).
	Client *http.Client
	// Log receives one line per failed fetch.
	Log zerolog.Logger
	// Timeout bounds one fetch, the Seconds the gateway waits included
	// (default Seconds + 15 s); it must be longer than Seconds.
	Timeout time.Duration
	// MaxBytes is the largest profile read, compressed or inflated
	// (default and at most DefaultMaxBytes, which the verdict reads its
	// samples with); a larger one is an error and is not kept.
	MaxBytes int64
	// Processes, when set, replaces URL: it is asked before each delta
	// for the allocs URLs of the processes to sample (a pager rule's,
	// found through Prometheus's discovery). Each is sampled at once, with
	// its own /metrics' counts, and the deltas are merged into one: a
	// service of several replicas is compared as the one service it is.
	// A delta some process failed is no delta: merged from fewer
	// processes than the next, it would read as a change.
	Processes func(ctx context.Context) ([]string, error)
	// Concurrency bounds the processes fetched at once (default 4).
	Concurrency int
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	if c.Seconds == 0 {
		c.Seconds = DefaultSeconds
	}
	if c.Every == 0 {
		c.Every = DefaultEvery
	}
	if c.Keep == 0 {
		c.Keep = DefaultKeep
	}
	if c.Client == nil {
		// A redirect is an answer, never followed: a discovered process
		// (Processes) could otherwise point the pager anywhere its network
		// reaches, as targets.Fetch refuses too.
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Timeout == 0 {
		c.Timeout = c.window() + 15*time.Second
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	return c
}

// window is one delta's length as a duration.
func (c Config) window() time.Duration { return time.Duration(c.Seconds) * time.Second }

// Validate reports what is wrong with c once its defaults are filled in;
// New panics on a Config it rejects, so a caller that reads the settings
// from flags calls it first to report them.
func (c Config) Validate() error {
	_, err := c.withDefaults().deltaURL()
	return err
}

// deltaURL checks c and returns the URL of one delta: c.URL with
// seconds=Seconds set in its query.
func (c Config) deltaURL() (string, error) {
	switch {
	case c.Seconds < 1 || c.Seconds > MaxSeconds:
		return "", fmt.Errorf("heapdelta: seconds %d: want 1 to %d, well under the gateway's 2-minute write timeout", c.Seconds, MaxSeconds)
	case c.Every <= c.window():
		return "", fmt.Errorf("heapdelta: every %s: want longer than the delta's %d s, so deltas never overlap", c.Every, c.Seconds)
	case c.Concurrency < 1:
		return "", fmt.Errorf("heapdelta: concurrency %d: want at least 1 fetch at once", c.Concurrency)
	case c.Keep < 1:
		return "", fmt.Errorf("heapdelta: keep %d: want at least 1 delta", c.Keep)
	case c.Timeout <= c.window():
		return "", fmt.Errorf("heapdelta: timeout %s: want longer than the delta's %d s, which the gateway waits before it answers", c.Timeout, c.Seconds)
	case c.MaxBytes < 1 || c.MaxBytes > DefaultMaxBytes:
		return "", fmt.Errorf("heapdelta: max bytes %d: want 1 to %d", c.MaxBytes, DefaultMaxBytes)
	}
	if c.CountsURL != "" {
		if u, err := url.Parse(c.CountsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("heapdelta: counts url %q: want http(s)://host/metrics", c.CountsURL)
		}
	}
	if c.Processes != nil {
		return "", nil
	}
	return withSeconds(c.URL, c.Seconds)
}

// withSeconds is the delta URL of an allocs URL: seconds set in its query.
func withSeconds(allocs string, seconds int) (string, error) {
	u, err := url.Parse(allocs)
	if err != nil {
		return "", fmt.Errorf("heapdelta: url %q: %w", allocs, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("heapdelta: url %q: want http(s)://host/debug/pprof/allocs", allocs)
	}
	q := u.Query()
	q.Set("seconds", strconv.Itoa(seconds))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Sample is one delta profile.
type Sample struct {
	// From and To are the delta's window: To is when its fetch returned,
	// From is Seconds before.
	From, To time.Time
	// Raw is the profile as served (gzipped protobuf); it is shared by
	// every copy of the Sample and must not be modified.
	Raw []byte
	// Total is the bytes allocated in the window (alloc_space).
	Total int64
	// Lengths are what the gateway forwarded in the window, from its own
	// counters; nil when they could not be read.
	Lengths *Lengths
	// Processes are the allocs URLs the delta is of, sorted, when
	// Config.Processes named them.
	Processes []string
}

// Sampler takes a delta every Config.Every and keeps the newest
// Config.Keep of them.
type Sampler struct {
	cfg     Config
	url     string
	counts  string // the gateway's /metrics
	clock   Clock
	results *prometheus.CounterVec
	seconds prometheus.Histogram
	// mu guards samples, oldest first, at most cfg.Keep of them.
	mu      sync.Mutex
	samples []Sample
}

// New registers the sampler's metrics on reg and returns it; Run starts
// it. It panics on a Config that Validate rejects.
func New(cfg Config, reg prometheus.Registerer) *Sampler {
	cfg = cfg.withDefaults()
	u, err := cfg.deltaURL()
	if err != nil {
		panic(err)
	}
	window := cfg.window().Seconds()
	s := &Sampler{
		cfg:    cfg,
		url:    u,
		counts: cfg.CountsURL,
		clock:  RealClock{},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_delta_profiles_total", Help: "Delta heap profiles fetched of the sampled processes, by result; failed ones are not kept.",
		}, []string{"result"}),
		// A delta takes its Seconds by design; the buckets past that show
		// how long the gateway took to build and send it.
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pager_delta_profile_fetch_seconds",
			Help:    "Time a successful delta heap profile fetch took, the delta's own seconds included.",
			Buckets: []float64{window, window + 0.1, window + 0.25, window + 0.5, window + 1, window + 2.5, window + 5, window + 15},
		}),
	}
	reg.MustRegister(s.results, s.seconds)
	for _, r := range []string{"ok", "error"} {
		s.results.WithLabelValues(r)
	}
	return s
}

// Run takes a delta at once, then one every Every, until ctx ends. A
// failed fetch is logged and counted, never kept, and retried after
// min(Every, RetryAfter).
func (s *Sampler) Run(ctx context.Context) {
	for ctx.Err() == nil {
		next := s.clock.Now().Add(s.cfg.Every)
		if err := s.take(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			next = s.clock.Now().Add(min(s.cfg.Every, RetryAfter))
		}
		// A fetch that outlasted Every is followed by the next at once.
		if wait := next.Sub(s.clock.Now()); wait > 0 && s.clock.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// Samples returns a copy of the deltas held, oldest first.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// take fetches one delta and keeps it. A fetch cut short because ctx
// ended is the pager stopping, not the gateway failing: it is neither
// counted nor logged.
func (s *Sampler) take(ctx context.Context) error {
	began := s.clock.Now()
	sample, err := s.sample(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.results.WithLabelValues("error").Inc()
			s.cfg.Log.Warn().Err(err).Msg("delta heap profile failed; retrying")
		}
		return err
	}
	s.results.WithLabelValues("ok").Inc()
	s.seconds.Observe(sample.To.Sub(began).Seconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	// A delta of other processes than the last (a replica added, gone or
	// replaced) starts the history again: the sum of three replicas'
	// allocation against two's would read as a 50 % growth.
	if n := len(s.samples); n > 0 && !slices.Equal(s.samples[n-1].Processes, sample.Processes) {
		s.samples = s.samples[:0]
	}
	if len(s.samples) == s.cfg.Keep {
		copy(s.samples, s.samples[1:])
		s.samples = s.samples[:len(s.samples)-1]
	}
	s.samples = append(s.samples, sample)
	return nil
}

// sample takes one delta: of the one URL, or of every process
// Config.Processes names, at once, merged.
func (s *Sampler) sample(ctx context.Context) (Sample, error) {
	if s.cfg.Processes == nil {
		one, _, err := s.fetchCounted(ctx, s.url, s.counts)
		return one, err
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	allocs, err := s.cfg.Processes(pctx)
	cancel()
	if err != nil {
		return Sample{}, fmt.Errorf("heapdelta: the processes to sample: %w", err)
	}
	if len(allocs) == 0 {
		return Sample{}, errors.New("heapdelta: no process to sample")
	}
	allocs = slices.Sorted(slices.Values(allocs))
	parts := make([]Sample, len(allocs))
	profiles := make([]*profile.Profile, len(allocs))
	errs := make([]error, len(allocs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.cfg.Concurrency)
	for i, a := range allocs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			u, err := withSeconds(a, s.cfg.Seconds)
			if err == nil {
				parts[i], profiles[i], err = s.fetchCounted(ctx, u, CountsURL(a))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Sample{}, err
	}
	if len(parts) == 1 {
		parts[0].Processes = allocs
		return parts[0], nil
	}
	merged, err := profile.Merge(profiles)
	if err != nil {
		return Sample{}, fmt.Errorf("heapdelta: merging the processes' deltas: %w", err)
	}
	var buf bytes.Buffer
	if err := merged.Write(&buf); err != nil {
		return Sample{}, fmt.Errorf("heapdelta: writing the merged delta: %w", err)
	}
	// The verdict reads a delta within MaxBytes: a merge past it would be
	// kept, counted ok, and refused at page time.
	if int64(buf.Len()) > s.cfg.MaxBytes {
		return Sample{}, fmt.Errorf("heapdelta: the %d processes' merged delta is %d bytes, over %d", len(allocs), buf.Len(), s.cfg.MaxBytes)
	}
	out := Sample{Raw: buf.Bytes(), Lengths: &Lengths{}, Processes: allocs}
	for _, p := range parts {
		if p.To.After(out.To) {
			out.To = p.To
		}
		out.Total += p.Total
		if p.Lengths == nil {
			out.Lengths = nil
		} else if out.Lengths != nil {
			out.Lengths.SumN += p.Lengths.SumN
			out.Lengths.SumN2 += p.Lengths.SumN2
		}
	}
	out.From = out.To.Add(-s.cfg.window())
	return out, nil
}

// fetchCounted fetches one delta from deltaURL, with the counts read from
// counts ("" for none) around it.
func (s *Sampler) fetchCounted(ctx context.Context, deltaURL, counts string) (Sample, *profile.Profile, error) {
	var one Sample
	var p *profile.Profile
	lengths, err := s.lengthsAround(ctx, counts, func() (err error) {
		one, p, err = s.fetch(ctx, deltaURL)
		return err
	})
	one.Lengths = lengths
	return one, p, err
}

// fetch reads one delta and checks that it is one: a profile with
// alloc_space samples and a duration. The cumulative profile Go serves
// when the seconds query is lost (by a proxy, say) has no duration, and
// taken for a delta it would show everything ever allocated as a change.
func (s *Sampler) fetch(ctx context.Context, deltaURL string) (Sample, *profile.Profile, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, deltaURL, nil)
	if err != nil {
		return Sample{}, nil, fmt.Errorf("heapdelta: %w", err)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return Sample{}, nil, fmt.Errorf("fetching %s: %w", deltaURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Sample{}, nil, fmt.Errorf("fetching %s: %s: %s", deltaURL, resp.Status, bytes.TrimSpace(body))
	}
	raw, p, err := pproftop.Read(resp.Body, s.cfg.MaxBytes)
	if err != nil {
		return Sample{}, nil, fmt.Errorf("reading %s (MaxBytes %d): %w", deltaURL, s.cfg.MaxBytes, err)
	}
	to := s.clock.Now()
	if p.DurationNanos <= 0 {
		return Sample{}, nil, fmt.Errorf("reading %s: %w", deltaURL, errNotDelta)
	}
	_, total, err := pproftop.Top(p, "alloc_space", 0)
	if err != nil {
		return Sample{}, nil, fmt.Errorf("reading %s: %w", deltaURL, err)
	}
	return Sample{From: to.Add(-s.cfg.window()), To: to, Raw: raw, Total: total}, p, nil
}

// errNotDelta is a profile served without a duration, as Go serves a
// cumulative one.
var errNotDelta = errors.New("a profile without a duration, not a delta: check that the URL is net/http/pprof's allocs endpoint, reached by no proxy that drops its seconds query")

// Clock is the time the deltas are stamped and spaced in, and the pager's
// captures are timed by; a test's is a fake one it moves on.
type Clock interface {
	Now() time.Time
	// Sleep waits d (more than 0), or until ctx ends: then it returns
	// ctx's error.
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the time of day.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer, which it stops when ctx ends first.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
