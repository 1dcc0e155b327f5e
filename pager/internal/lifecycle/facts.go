package lifecycle

import (
	"context"
	"fmt"
	"path"
	"time"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
)

// DefaultFactsTimeout bounds the reads of one page's facts: Prometheus
// answers these instant queries in milliseconds, so one that has not
// answered in 10 s is down or overloaded, and the page is better served by
// saying so than by waiting.
const DefaultFactsTimeout = 10 * time.Second

// Deltas is where a process's delta heap profiles are held:
// heapdelta.Sampler.
type Deltas interface {
	Samples() []heapdelta.Sample
}

// process is what a page's facts read of the process its alert's rule
// profiles: gcJob, the Prometheus job of its garbage collector ("" for
// none), and deltas, the delta sampler's profiles when the sampler samples
// that process, else nil and noDeltas says why.
type process struct {
	gcJob    string
	deltas   Deltas
	noDeltas string
}

// process finds the process of an alert. Without a config file every
// alert's process is the one the flags name, as it always was. With one,
// an alert's rule says: a sampled rule's page is compared on its own
// processes' deltas, and an unsampled rule's page on none.
func (l *Lifecycle) process(labels map[string]string) process {
	p := process{gcJob: l.cfg.GCJob, deltas: l.cfg.Deltas, noDeltas: "the pager runs without -profile-url: no delta heap profiles to compare"}
	if l.cfg.Targets == nil {
		return p
	}
	r, err := l.rules.Match(labels)
	if err != nil {
		return process{noDeltas: err.Error()}
	}
	p.gcJob = r.GCJob
	p.deltas = l.cfg.RuleDeltas[r.Name]
	switch {
	case !r.Sampled:
		p.deltas, p.noDeltas = nil, fmt.Sprintf("the delta sampler does not sample the processes of rule %q (no `sampled: true`): no delta heap profiles of theirs to compare", r.Name)
	case p.deltas == nil:
		p.noDeltas = fmt.Sprintf("rule %q is sampled, and no sampler of its processes runs", r.Name)
	}
	return p
}

// readFacts reads a new page's or ticket's facts (incident.Facts) and journals them.
// It runs beside the webhook, tracked by l.captures: a slow or dead
// Prometheus never delays the page, and Close waits for it (or, past its
// context, cancels its queries).
func (l *Lifecycle) readFacts(a store.Accepted) {
	proc := l.process(a.Alert.Labels)
	ctx, cancel := context.WithTimeout(l.captureCtx, l.cfg.FactsTimeout)
	f := l.cfg.Prometheus.Facts(ctx, promfacts.AlertOf(a.Alert.Labels, a.Alert.Annotations, a.Alert.StartsAt))
	if proc.gcJob != "" {
		f.GC = l.cfg.Prometheus.GC(ctx, proc.gcJob, f.BurnFrom, a.Alert.StartsAt)
		if f.GC.Error != "" {
			f.Errors = append(f.Errors, "the GC: "+f.GC.Error)
		}
	}
	cancel()
	f.Heap = l.heapChange(a, f.BurnFrom, proc)
	if f.Heap.Error != "" {
		f.Errors = append(f.Errors, "the heap: "+f.Heap.Error)
	}
	if fn := growthFunction(f.Heap, proc.deltas, a.Alert.StartsAt); fn != "" {
		f.Heap.Growth = l.growth(a.Incident, fn, proc.deltas)
		if g := f.Heap.Growth; g.Error != "" {
			f.Errors = append(f.Errors, "the growth: "+g.Error)
		}
	}
	f.TakenAt = time.Now()
	if !l.journal(a.Incident, "facts", func(time.Time) error { return l.cfg.Store.AddFacts(a.Incident, f, f.TakenAt) }) {
		return
	}
	ev := l.cfg.Log.Warn()
	if len(f.Errors) > 0 {
		ev = ev.Strs("not_read", f.Errors)
	}
	ev.Str("incident", a.Incident).Str("facts", f.Summary()).Msg("FACTS at page time")
	l.postFinding(a.Incident)
}

// readGCAfter reads the collector's share over the minute after a page's
// resolve reached the pager, once Prometheus has scraped its end, and
// journals it: the after of the facts' before and during, which with the
// fix deployed falls back. A pager stopped in between reads none.
func (l *Lifecycle) readGCAfter(a store.Accepted) {
	job := l.process(a.Alert.Labels).gcJob
	if job == "" {
		return
	}
	resolved := l.clock.Now()
	if l.clock.Sleep(l.waits, promfacts.AfterWindow+afterScrape) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(l.captureCtx, l.cfg.FactsTimeout)
	g := l.cfg.Prometheus.GCAfter(ctx, job, resolved)
	cancel()
	if !l.journal(a.Incident, "GC after the resolve", func(at time.Time) error { return l.cfg.Store.AddGCAfter(a.Incident, *g, at) }) {
		return
	}
	ev := l.cfg.Log.Info()
	if g.Error != "" {
		ev = ev.Str("not_read", g.Error)
	}
	ev.Str("incident", a.Incident).Str("gc", g.Words).Msg("GC after the resolve")
}

// growthFunction is the function a growth fit is about: the one whose
// allocation changed or, when none did or nothing could be compared, the
// one that allocated the most as the alert fired. A creep changes no
// function suddenly, and a ticket's long window (the lab's 48 minutes,
// production's 3 days) reaches back past the oldest delta the pager
// holds, so neither has a "what changed"; how the largest function grows
// with the streams' length is then the verdict. "" when there is no delta
// to read (the heap's error says why).
func growthFunction(c *incident.HeapChange, deltas Deltas, fired time.Time) string {
	if deltas == nil {
		return ""
	}
	if c.Changed {
		return c.Function
	}
	fn, err := heapdelta.Largest(deltas.Samples(), fired.Add(heapdelta.Slack))
	if err != nil {
		return ""
	}
	return fn
}

// growth fits how fn's bytes per stream grow with the stream's length over
// every delta profile the pager holds (heapdelta.FitGrowth), with what the
// gateway forwarded in each, read from it around the delta
// (heapdelta.Lengths). A creep's ticket gets it as a page does: the
// deltas span the last Keep × Every of the gateway's life, over which its
// streams' lengths changed, or did not. Prometheus's counts are no
// substitute: its increase over a 10 s window scraped every 5 s put a
// long stream in the next window as often as in its own, and that noise
// fitted the baseline's quadratic Append as n^1.2, "linear".
func (l *Lifecycle) growth(id, fn string, deltas Deltas) *incident.Growth {
	var ws []heapdelta.Window
	for _, s := range deltas.Samples() {
		if s.Lengths == nil {
			continue
		}
		b, err := heapdelta.FunctionBytes(s, fn)
		if err != nil {
			return &incident.Growth{Function: fn, Error: err.Error()}
		}
		ws = append(ws, heapdelta.Window{From: s.From, To: s.To, Bytes: b, SumN: s.Lengths.SumN, SumN2: s.Lengths.SumN2})
	}
	if len(ws) == 0 {
		return &incident.Growth{Function: fn, Error: NoLengths}
	}
	g := heapdelta.FitGrowth(fn, ws)
	l.logWindows(id, fn, ws, g)
	return &incident.Growth{Function: fn, Fitted: g.Fitted, Exponent: g.Exponent, StdErr: g.StdErr, R2: g.R2, Windows: g.Windows, Spread: g.Spread, Words: g.Words}
}

// logWindows logs the windows a growth fit was given, one line per fit,
// so an operator can see why a verdict was or was not given (an outlier, a
// window without the function's bytes, which the fit leaves out) without
// the pager's memory. At most the newest maxLoggedWindows, about 70
// bytes each, keep the line within what log shippers take whole.
func (l *Lifecycle) logWindows(id, fn string, ws []heapdelta.Window, g heapdelta.Growth) {
	ws = ws[max(0, len(ws)-maxLoggedWindows):]
	from := make([]string, len(ws))
	bytes, sumN, sumN2 := make([]float64, len(ws)), make([]float64, len(ws)), make([]float64, len(ws))
	for i, w := range ws {
		from[i], bytes[i], sumN[i], sumN2[i] = w.From.UTC().Format(time.RFC3339), w.Bytes, w.SumN, w.SumN2
	}
	l.cfg.Log.Info().Str("incident", id).Str("function", fn).Bool("fitted", g.Fitted).Float64("exponent", g.Exponent).Float64("stderr", g.StdErr).
		Int("windows_fitted", g.Windows).Float64("spread", g.Spread).Strs("from", from).Floats64("bytes", bytes).Floats64("sum_n", sumN).Floats64("sum_n2", sumN2).Msg("growth fit's delta windows")
}

// maxLoggedWindows bounds the windows logWindows logs: 100 windows make a
// line of about 8 KB, under the 16 KB at which Docker splits a line.
const maxLoggedWindows = 100

// NoLengths says why a growth fit has no stream counts at all.
const NoLengths = "no delta holds the gateway's stream counts (" + heapdelta.EventsCounter + " and " + heapdelta.EventPlaces +
	" on the /metrics beside -profile-url, read around each delta): a gateway older than this pager, or a listener that serves no /metrics"

// afterScrape is how long past the after-view's minute the pager waits
// before reading it: a scrape interval or two (the lab's and compose's are
// 5 s), so Prometheus holds the minute's end.
const afterScrape = 15 * time.Second

// heapChange compares the delta heap profile taken before the burn with
// one taken during it: the burn window runs from burnFrom (the alert's
// start less the long window of the pair the facts are read over) to the
// alert's start. The two deltas are saved beside the page's profile, so
// pprof's UI can show their difference.
func (l *Lifecycle) heapChange(a store.Accepted, burnFrom time.Time, proc process) *incident.HeapChange {
	if proc.deltas == nil {
		return &incident.HeapChange{Error: proc.noDeltas}
	}
	if burnFrom.IsZero() {
		return &incident.HeapChange{Error: "no window pair, so no burn window to compare the heap over"}
	}
	fired := a.Alert.StartsAt
	before, during, reason, ok := heapdelta.Pick(proc.deltas.Samples(), burnFrom, fired)
	// A page that arrives within heapdelta.Slack of the alert's start may
	// come before the delta open at that moment ends: that one is worth
	// the wait, and the facts are beside the page, never in its way.
	if wait := fired.Add(heapdelta.Slack).Sub(l.clock.Now()); !ok && wait > 0 && l.clock.Sleep(l.waits, wait) == nil {
		before, during, reason, ok = heapdelta.Pick(proc.deltas.Samples(), burnFrom, fired)
	}
	if !ok {
		return &incident.HeapChange{Error: reason}
	}
	c := &incident.HeapChange{BeforeFrom: before.From, BeforeTo: before.To, DuringFrom: during.From, DuringTo: during.To}
	v, err := heapdelta.Compare(before, during, heapdelta.DefaultThreshold)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.Changed, c.Function, c.Words, c.Threshold = v.Changed, v.Function, v.Words, v.Threshold
	c.Before, c.During, c.TotalBefore, c.TotalDuring = v.Before, v.During, v.TotalBefore, v.TotalDuring
	for _, d := range []struct {
		suffix string
		raw    []byte
		file   *string
	}{{"-delta-before", before.Raw, &c.BeforeFile}, {"-delta-during", during.Raw, &c.DuringFile}} {
		name, err := profileName(a.Alert, d.suffix)
		if err == nil {
			err = l.cfg.Store.SaveProfile(name, d.raw)
		}
		if err != nil {
			// The verdict stands without the files; only the links to
			// pprof's view of the difference go.
			l.cfg.Log.Error().Err(err).Str("incident", a.Incident).Msg("could not store a delta heap profile")
			c.BeforeFile, c.DuringFile = "", ""
			break
		}
		*d.file = path.Join(store.ProfilesDir, name)
	}
	return c
}
