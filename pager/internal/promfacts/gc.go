package promfacts

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/prometheus/common/model"

	"burnlab/shared/incident"
)

// The write-up's causal claim has two halves: a function makes the garbage
// (the heap's verdict), and the collector, "running flat-out to keep up",
// is what made streams slow. GC reads the second half from the Go runtime
// metrics the process exports (shared/service's collector, from
// runtime/metrics): the share of its CPU the collector took, the share
// taken by mark assist (collection work charged to the goroutines that
// allocate, the request handlers themselves), GC cycles a second, and the
// p99 of stop-the-world pauses and of the time a runnable goroutine waited
// for a CPU. Each is read over the burn window and over as long a window
// before it.
//
// The share's denominator is process_cpu_seconds_total, the CPU the process
// used: the runtime's /cpu/classes/total counts GOMAXPROCS × wall time,
// idle included, so a share of it falls as the process idles.

// gcQueries are the figures, each with %[1]s the job's matcher and %[2]s
// the window.
var gcQueries = struct{ share, assist, cycles, pause, sched string }{
	share:  `sum(rate(go_cpu_classes_gc_total_cpu_seconds_total{%[1]s}[%[2]s])) / sum(rate(process_cpu_seconds_total{%[1]s}[%[2]s]))`,
	assist: `sum(rate(go_cpu_classes_gc_mark_assist_cpu_seconds_total{%[1]s}[%[2]s])) / sum(rate(process_cpu_seconds_total{%[1]s}[%[2]s]))`,
	cycles: `sum(rate(go_gc_cycles_total_gc_cycles_total{%[1]s}[%[2]s]))`,
	pause:  `histogram_quantile(0.99, sum by (le) (rate(go_sched_pauses_total_gc_seconds_bucket{%[1]s}[%[2]s])))`,
	sched:  `histogram_quantile(0.99, sum by (le) (rate(go_sched_latencies_seconds_bucket{%[1]s}[%[2]s])))`,
}

// job is what a job name must be before it goes into a query.
var job = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)

// minGCWindow is the shortest window the figures are read over: the
// runtime updates its CPU classes at each GC cycle's end, and a scrape
// interval or two says nothing.
const minGCWindow = 30 * time.Second

// AfterWindow is the window the after-view is read over: the minute after
// the resolve. Any minute before it may hold the broken build still
// serving, whose CPU, many times the fixed build's, would swamp the share.
const AfterWindow = time.Minute

// GCAfter reads the collector's share of the processes of job jobName over
// the minute after resolved, once it is over: the after of GC's before and
// during.
func (c *Client) GCAfter(ctx context.Context, jobName string, resolved time.Time) *incident.GCAfter {
	g := &incident.GCAfter{Job: jobName, From: resolved, To: resolved.Add(AfterWindow)}
	if g.Error = c.cannotRead(jobName); g.Error != "" {
		return g
	}
	matcher, window := fmt.Sprintf("job=%q", jobName), model.Duration(AfterWindow).String()
	var errs []error
	for q, v := range map[string]**float64{gcQueries.share: &g.CPUShare, gcQueries.assist: &g.AssistShare} {
		var err error
		if *v, err = c.instant(ctx, fmt.Sprintf(q, matcher, window), g.To); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		g.Error = fmt.Sprintf("%d of 2 GC queries failed, the first: %v", len(errs), errs[0])
	}
	g.Words = g.Say()
	return g
}

// cannotRead says why the GC figures of jobName cannot be read, or "".
func (c *Client) cannotRead(jobName string) string {
	switch {
	case c == nil:
		return "the pager runs without -prometheus-url: no GC figures"
	case !job.MatchString(jobName):
		return fmt.Sprintf("the job %.80q is not a plain Prometheus job name: no GC figures", jobName)
	}
	return ""
}

// GC reads the collector's figures of the processes of Prometheus job
// jobName over the burn window, from burnFrom to fired, and over as long a
// window before it. A figure Prometheus has no value for (no series yet,
// no CPU used) is nil, and the words say what is missing.
func (c *Client) GC(ctx context.Context, jobName string, burnFrom, fired time.Time) *incident.GC {
	g := &incident.GC{Job: jobName}
	if g.Error = c.cannotRead(jobName); g.Error != "" {
		return g
	}
	if burnFrom.IsZero() || !burnFrom.Before(fired) {
		g.Error = "no burn window to read the GC over"
		return g
	}
	w := max(fired.Sub(burnFrom), minGCWindow).Round(time.Second)
	g.DuringFrom, g.DuringTo = fired.Add(-w), fired
	g.BeforeFrom, g.BeforeTo = g.DuringFrom.Add(-w), g.DuringFrom
	matcher, window := fmt.Sprintf("job=%q", jobName), model.Duration(w).String()
	var errs []error
	read := func(q string, at time.Time) *float64 {
		v, err := c.instant(ctx, fmt.Sprintf(q, matcher, window), at)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	for _, f := range []struct {
		q              string
		before, during **float64
	}{
		{gcQueries.share, &g.CPUShareBefore, &g.CPUShareDuring},
		{gcQueries.assist, &g.AssistShareBefore, &g.AssistShareDuring},
		{gcQueries.cycles, &g.CyclesPerSecondBefore, &g.CyclesPerSecondDuring},
		{gcQueries.pause, &g.PauseP99Before, &g.PauseP99During},
		{gcQueries.sched, &g.SchedLatencyP99Before, &g.SchedLatencyP99During},
	} {
		*f.before, *f.during = read(f.q, g.BeforeTo), read(f.q, g.DuringTo)
	}
	if len(errs) > 0 {
		// One line, the first cause: Prometheus down fails every query
		// the same way.
		g.Error = fmt.Sprintf("%d of 10 GC queries failed, the first: %v", len(errs), errs[0])
	}
	g.Words = g.Say()
	return g
}
