package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"burnlab/loadgen/internal/shape"
)

// Config is one load run.
type Config struct {
	// Target is the full URL streams are POSTed to, e.g.
	// http://127.0.0.1:8080/v1/chat/stream.
	Target string
	// Keys are API keys used in turn, one tenant each.
	Keys  []string
	Shape shape.Shape
	// Duration of the schedule; 0 runs until ctx ends.
	Duration time.Duration
	// Ramp raises the start rate linearly from 0 over this long.
	Ramp time.Duration
	// MaxInFlight caps concurrent streams; a start due while the cap is
	// reached is skipped and counted, never delayed.
	MaxInFlight int
	// Timeout bounds one stream (default 2 minutes).
	Timeout time.Duration
	// Grace lets streams in flight at the end of the schedule finish
	// (default: a second past Timeout, so each stream meets its own
	// timeout first and is counted as such).
	Grace time.Duration
	// Shard is this loadgen's share of the schedule; the zero value sends
	// all of it.
	Shard Shard
}

// Validate rejects a run that cannot start.
func (c *Config) Validate() error {
	u, err := url.Parse(c.Target)
	switch {
	case err != nil || u.Scheme == "" || u.Host == "":
		return fmt.Errorf("target %q: want a URL such as http://127.0.0.1:8080/v1/chat/stream", c.Target)
	case len(c.Keys) == 0:
		return errors.New("no API keys to send load with: give -tenants key1,key2,… (a probe tenant's key only calibrates)")
	case c.MaxInFlight < 1:
		return fmt.Errorf("max-inflight must be at least 1, got %d", c.MaxInFlight)
	case c.Duration < 0 || c.Ramp < 0:
		return errors.New("duration and ramp must not be negative")
	}
	if err := c.Shard.validate(); err != nil {
		return err
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Grace <= 0 {
		c.Grace = c.Timeout + time.Second
	}
	return c.Shape.Validate()
}

// offset is when start i is due: the integral of a rate that ramps up
// linearly over ramp, then holds.
func offset(i int, rate float64, ramp time.Duration) time.Duration {
	n := float64(i)
	rs := ramp.Seconds()
	if rampStarts := rate * rs / 2; rs > 0 && n < rampStarts {
		return time.Duration(math.Sqrt(2*n*rs/rate) * float64(time.Second))
	} else if rs > 0 {
		// After the ramp: N(t) = rate·ramp/2 + rate·(t − ramp).
		return time.Duration((rs/2 + n/rate) * float64(time.Second))
	}
	return time.Duration(n / rate * float64(time.Second))
}

// Run sends the load and records every stream in rec. It returns when the
// schedule is over and the streams in flight have finished (or the grace
// ran out), or when ctx ends.
func Run(ctx context.Context, cfg Config, rec *Recorder) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        cfg.MaxInFlight,
		MaxIdleConnsPerHost: cfg.MaxInFlight,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	defer client.CloseIdleConnections()

	// Streams outlive the schedule by up to Grace; a stop from the
	// caller cancels them at once.
	streamCtx, cancelStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStreams()
	stopStreams := context.AfterFunc(ctx, cancelStreams)
	defer stopStreams()

	var wg sync.WaitGroup
	sem := make(chan struct{}, cfg.MaxInFlight)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for st := range Schedule(cfg.Shape, cfg.Ramp, cfg.Duration, cfg.Shard) {
		timer.Reset(time.Until(start.Add(st.Due)))
		select {
		case <-ctx.Done():
			return finish(&wg, cfg.Grace, cancelStreams)
		case <-timer.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			rec.drop()
			continue
		}
		rec.started()
		scheduled := start.Add(st.Due)
		key := cfg.Keys[st.I%len(cfg.Keys)]
		wg.Go(func() {
			defer func() { <-sem }()
			sctx, cancel := context.WithCancelCause(streamCtx)
			t := time.AfterFunc(cfg.Timeout-time.Since(scheduled), func() { cancel(errStreamTimeout) })
			res := streamOnce(sctx, client, cfg.Target, key, st.Events, scheduled, st.Long)
			t.Stop()
			cancel(nil)
			rec.record(res)
		})
	}
	return finish(&wg, cfg.Grace, cancelStreams)
}

// finish waits for the streams in flight, for up to grace.
func finish(wg *sync.WaitGroup, grace time.Duration, cancelStreams context.CancelFunc) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cancelStreams()
		<-done
	}
	return nil
}
