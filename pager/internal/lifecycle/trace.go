package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"burnlab/pager/internal/flight"
	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
)

// MaxTraceBytes bounds a flight-recorder snapshot the pager takes: the
// gateway keeps at most 4 MiB by default (16 times that is room for a
// service's larger recorder), and a snapshot may hold a little more than
// the recorder's bound (its newest generation).
const MaxTraceBytes = 64 << 20

// traceMetrics are the snapshots' fetch time and size.
type traceMetrics struct {
	seconds prometheus.Histogram
	bytes   prometheus.Histogram
	fetches *prometheus.CounterVec
}

func newTraceMetrics(reg prometheus.Registerer) traceMetrics {
	m := traceMetrics{
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pager_trace_fetch_duration_seconds", Help: "Time to fetch a flight-recorder snapshot from -trace-url, stored and split included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pager_trace_size_bytes", Help: "Size of the flight-recorder snapshots fetched from -trace-url.",
			Buckets: prometheus.ExponentialBuckets(256<<10, 2, 9),
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_trace_fetches_total", Help: "Flight-recorder snapshots fetched from -trace-url with a profile, by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.seconds, m.bytes, m.fetches)
	for _, r := range []string{"ok", "error"} {
		m.fetches.WithLabelValues(r)
	}
	return m
}

// traceName is the file a snapshot is kept in: its profile's, with the
// suffix `go tool trace` users expect.
func traceName(profile string) string { return strings.TrimSuffix(profile, ".pb.gz") + ".trace" }

// snapshot fetches the flight recorder's snapshot, stores it beside the
// profile it is taken with, and splits its slowest requests' time. A
// snapshot that cannot be split is kept all the same: `go tool trace`
// may read what the split could not.
func (l *Lifecycle) snapshot(ctx context.Context, url, profile string) *incident.Trace {
	start := time.Now()
	t := &incident.Trace{}
	raw, err := l.fetchTrace(ctx, url)
	if err == nil {
		err = l.cfg.Store.SaveProfile(traceName(profile), raw)
	}
	if err != nil {
		l.trace.fetches.WithLabelValues("error").Inc()
		t.Error = err.Error()
		return t
	}
	t.File, t.Bytes = path.Join(store.ProfilesDir, traceName(profile)), int64(len(raw))
	if err := l.split(ctx, t, raw); err != nil {
		t.Error = "splitting the requests' time: " + err.Error()
	}
	t.FetchSeconds = time.Since(start).Seconds()
	l.trace.fetches.WithLabelValues("ok").Inc()
	l.trace.seconds.Observe(t.FetchSeconds)
	l.trace.bytes.Observe(float64(t.Bytes))
	return t
}

// split fills t's window and requests from the snapshot raw, unless ctx
// ends first: the reader is an experimental package parsing up to 64 MiB
// from the network, and however long it takes, the page's profile record
// must not wait past the capture's timeout. A split given up on runs on,
// its result dropped.
func (l *Lifecycle) split(ctx context.Context, t *incident.Trace, raw []byte) error {
	type result struct {
		from, to time.Time
		reqs     []incident.RequestTime
		err      error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.from, r.to, r.reqs, r.err = flight.Split(bytes.NewReader(raw))
		done <- r
	}()
	select {
	case r := <-done:
		t.From, t.To, t.Requests = r.from, r.to, r.reqs
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("given up: %w", ctx.Err())
	}
}

// fetchTrace reads the snapshot, at most MaxTraceBytes of it.
func (l *Lifecycle) fetchTrace(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxTraceBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", url, err)
	case len(raw) > MaxTraceBytes:
		return nil, fmt.Errorf("reading %s: over %d bytes, the pager's limit", url, MaxTraceBytes)
	case len(raw) == 0:
		return nil, errors.New("reading " + url + ": an empty snapshot")
	}
	return raw, nil
}
