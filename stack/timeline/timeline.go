// Package timeline runs the write-up's three days on the native lab: "p99
// had quietly climbed from 180 ms to 580 ms over three days", and the page
// came on the third night. The loadgen's long generations grow over the
// run (loadgen -creep), so the baseline's O(n²) transcript pushes the p99
// up by itself, with no injected fault; the lab's rules, whose windows
// compress 30 days into 10 hours (72x), ticket and then page, and the
// pager diagnoses each. The fixed build, given the same traffic, must
// stay silent.
package timeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"burnlab/shared/incident"
	"burnlab/shared/variant"
	"burnlab/stack/lab"
)

// Compression is how much faster than production the lab's SLO windows
// run: 30 days in 10 hours (prometheus/slo/windows/lab).
const Compression = 72

// Days is the write-up's creep: three days.
const Days = 72 * time.Hour

// Config is one timeline.
type Config struct {
	Root, Dir string
	Variant   variant.Variant
	// Duration is how long the creep takes in the lab; Days/Compression
	// (an hour) keeps the windows' meaning.
	Duration time.Duration
	// Shape is the calibrated traffic shape file, shared with the lab.
	Shape string
	Addrs lab.Addrs
	Log   io.Writer
	// poll is how often the pager is asked for new incidents.
	poll time.Duration
}

// Hour is one compressed hour of the run, as Prometheus saw it.
type Hour struct {
	Hour int `json:"hour"`
	// P99Ms is the p99 of the hour's customer streams, from the gateway's
	// histogram (what the dashboard shows); BreachShare the share of them
	// over the SLO. Nil when Prometheus had no figure.
	P99Ms       *float64 `json:"p99_ms"`
	BreachShare *float64 `json:"breach_share"`
	// P999Ms is the p99.9: with one long generation in 100 the p99 sits
	// on the edge between the ordinary streams and the long ones, and
	// moves between the two from hour to hour, where the p99.9 is the
	// long ones' and shows their climb.
	P999Ms *float64 `json:"p999_ms"`
	// Firing are the alerts of the stream-latency SLO firing at its end.
	Firing []string `json:"firing,omitempty"`
}

// Result is what the run found. Times are seconds of the run from the
// load's start; multiply by Compression for production's.
type Result struct {
	Variant        string   `json:"variant"`
	DurationS      float64  `json:"duration_s"`
	Compression    float64  `json:"compression"`
	TicketS        *float64 `json:"ticket_s"`
	PageS          *float64 `json:"page_s"`
	TicketVerdict  string   `json:"ticket_verdict"`
	PageVerdict    string   `json:"page_verdict"`
	TicketIncident string   `json:"ticket_incident,omitempty"`
	PageIncident   string   `json:"page_incident,omitempty"`
	P99StartMs     *float64 `json:"p99_start_ms"`
	P99EndMs       *float64 `json:"p99_end_ms"`
	Hours          []Hour   `json:"hours"`
	// Diagnosed says whether each alert's verdict names the baseline's
	// transcript with a quadratic growth (set for the ones that fired).
	TicketNamesAppend bool `json:"ticket_names_append"`
	PageNamesAppend   bool `json:"page_names_append"`
}

// appendFn is the write-up's guilty function, as the pager names it.
const appendFn = "transcript.(*Baseline).Append"

// slo is the SLO the creep burns.
const slo = "stream-latency"

// Run starts a lab with the creep's load, watches it for Duration and
// stops it. It returns what it saw; Check says whether that is the story.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.poll == 0 {
		cfg.poll = 5 * time.Second
	}
	r := Result{Variant: string(cfg.Variant), DurationS: cfg.Duration.Seconds(), Compression: Compression}
	l, err := lab.Start(ctx, lab.Config{Root: cfg.Root, Dir: cfg.Dir, Addrs: cfg.Addrs, Variant: cfg.Variant, Windows: "lab",
		Shape: cfg.Shape, Log: cfg.Log, NoLoad: true, LoadArgs: []string{"-creep", cfg.Duration.String()}})
	if err != nil {
		return r, err
	}
	defer l.Stop()
	if err := l.StartLoad(ctx); err != nil {
		return r, err
	}
	start := time.Now()
	hour := cfg.Duration / time.Duration(Days.Hours()) // one hour of the three days
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "timeline: "+format+"\n", args...) }
	say("the %s build, three days in %s: one hour every %s", cfg.Variant, cfg.Duration, hour.Round(time.Millisecond))

	nextHour := start.Add(hour)
	tick := time.NewTicker(cfg.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		if err := watchIncidents(l, start, &r, say); err != nil {
			say("the pager: %v", err)
		}
		for !now.Before(nextHour) {
			h := readHour(l, len(r.Hours)+1, hour)
			r.Hours = append(r.Hours, h)
			say("%s", h)
			nextHour = nextHour.Add(hour)
		}
		if now.Sub(start) >= cfg.Duration {
			break
		}
	}
	// The verdicts are read beside the alert; give the last one time.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && pendingVerdict(&r); {
		time.Sleep(cfg.poll)
		if err := watchIncidents(l, start, &r, say); err != nil {
			say("the pager: %v", err)
		}
	}
	r.P99StartMs, r.P99EndMs = firstP99(r.Hours, false), firstP99(r.Hours, true)
	return r, nil
}

func (h Hour) String() string {
	figure := func(v *float64, format string, scale float64) string {
		if v == nil {
			return "no data"
		}
		return fmt.Sprintf(format, *v*scale)
	}
	firing := "nothing firing"
	if len(h.Firing) > 0 {
		firing = "firing: " + strings.Join(h.Firing, ", ")
	}
	return fmt.Sprintf("day %d %02d:00  p99 %-8s p99.9 %-8s breach %-7s %s", (h.Hour-1)/24+1, (h.Hour-1)%24,
		figure(h.P99Ms, "%.0f ms", 1), figure(h.P999Ms, "%.0f ms", 1), figure(h.BreachShare, "%.2f %%", 100), firing)
}

// The queries of one compressed hour, over the customer streams the SLI
// counts.
const (
	streams = `route="/v1/chat/stream",traffic!="probe",outcome="ok"`
	p99Q    = `histogram_quantile(0.99, sum by (le) (rate(gateway_stream_duration_seconds_bucket{` + streams + `}[%s])))`
	p999Q   = `histogram_quantile(0.999, sum by (le) (rate(gateway_stream_duration_seconds_bucket{` + streams + `}[%s])))`
	breachQ = `1 - sum(rate(gateway_stream_duration_seconds_bucket{` + streams + `,le="0.6"}[%[1]s])) / sum(rate(gateway_stream_duration_seconds_count{` + streams + `}[%[1]s]))`
	firingQ = `ALERTS{alertstate="firing",sloth_slo="` + slo + `"}`
)

func readHour(l *lab.Lab, n int, hour time.Duration) Hour {
	window := fmt.Sprintf("%dms", hour.Milliseconds())
	h := Hour{Hour: n, P99Ms: one(l, fmt.Sprintf(p99Q, window), 1000), P999Ms: one(l, fmt.Sprintf(p999Q, window), 1000),
		BreachShare: one(l, fmt.Sprintf(breachQ, window), 1)}
	if series, err := l.Series(firingQ); err == nil {
		for _, s := range series {
			h.Firing = append(h.Firing, s["severity"])
		}
	}
	return h
}

// one is a query's single value times scale; nil when there is none, or
// it is NaN (no streams in the window).
func one(l *lab.Lab, q string, scale float64) *float64 {
	v, err := l.Query(q)
	if err != nil || len(v) != 1 {
		return nil
	}
	for _, x := range v {
		if !math.IsNaN(x) {
			x *= scale
			return &x
		}
	}
	return nil
}

// watchIncidents records the first ticket and page of the creep's SLO, and
// their verdicts once the pager has read them.
func watchIncidents(l *lab.Lab, start time.Time, r *Result, say func(string, ...any)) error {
	incs, err := l.Incidents()
	if err != nil {
		return err
	}
	// The pager lists the newest first; the story's are the first.
	incs = slices.DeleteFunc(incs, func(inc incident.Incident) bool { return len(inc.Timeline) == 0 })
	slices.SortFunc(incs, func(a, b incident.Incident) int { return a.Timeline[0].At.Compare(b.Timeline[0].At) })
	for _, inc := range incs {
		if inc.SLO != slo {
			continue
		}
		at, verdict, named := &r.TicketS, &r.TicketVerdict, &r.TicketNamesAppend
		id := &r.TicketIncident
		if inc.Severity == "page" {
			at, verdict, named, id = &r.PageS, &r.PageVerdict, &r.PageNamesAppend, &r.PageIncident
		} else if inc.Severity != "ticket" {
			continue
		}
		if *id != "" && *id != inc.ID {
			continue
		}
		if *id == "" {
			*id = inc.ID
			s := inc.Timeline[0].At.Sub(start).Seconds()
			*at = &s
			say("%s %s reached the pager %s into the run (%.0f h of the three days)", strings.ToUpper(inc.Severity), inc.AlertName,
				time.Duration(s*float64(time.Second)).Round(time.Second), s*Compression/3600)
		}
		if *verdict == "" && inc.Facts != nil {
			*verdict, *named = Verdict(inc)
			say("%s's verdict: %s", inc.Severity, *verdict)
		}
	}
	return nil
}

// Verdict is what an incident says of the heap: the profile's top
// function and how the fitted function grows; named is whether it is
// the write-up's: Append, quadratic.
func Verdict(inc incident.Incident) (verdict string, named bool) {
	var parts []string
	if p := inc.Profile; p != nil && len(p.Top) > 0 {
		parts = append(parts, fmt.Sprintf("top alloc_space %s (%.0f %%)", short(p.Top[0].Function), p.Top[0].FlatPct))
	}
	var g *incident.Growth
	if inc.Facts != nil && inc.Facts.Heap != nil {
		g = inc.Facts.Heap.Growth
		if inc.Facts.Heap.Changed {
			parts = append(parts, "heap: "+inc.Facts.Heap.Words)
		}
	}
	switch {
	case g == nil:
		parts = append(parts, "no growth fitted")
	case g.Error != "":
		parts = append(parts, "growth not fitted: "+g.Error)
	default:
		parts = append(parts, "growth: "+g.Words)
	}
	named = g != nil && g.Fitted && strings.HasSuffix(g.Function, appendFn) && g.Exponent >= 1.7
	return strings.Join(parts, "; "), named
}

func short(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

func pendingVerdict(r *Result) bool {
	return r.TicketS != nil && r.TicketVerdict == "" || r.PageS != nil && r.PageVerdict == ""
}

// firstP99 is the first hour's p99 with a figure, or the last's.
func firstP99(hours []Hour, last bool) *float64 {
	for i := range hours {
		h := hours[i]
		if last {
			h = hours[len(hours)-1-i]
		}
		if h.P99Ms != nil {
			return h.P99Ms
		}
	}
	return nil
}

// Check says whether the run told the story: the baseline tickets, then
// pages, and each names Append's quadratic growth; the fixed build fires
// nothing.
func (r Result) Check() error {
	var errs []error
	if r.Variant == string(variant.Fixed) {
		if r.TicketS != nil || r.PageS != nil {
			errs = append(errs, fmt.Errorf("the fixed build fired (ticket at %v s, page at %v s): it must stay silent", deref(r.TicketS), deref(r.PageS)))
		}
		return errors.Join(errs...)
	}
	switch {
	case r.TicketS == nil:
		errs = append(errs, errors.New("no ticket fired"))
	case r.PageS != nil && *r.PageS <= *r.TicketS:
		errs = append(errs, fmt.Errorf("the page (%.0f s) came before the ticket (%.0f s)", *r.PageS, *r.TicketS))
	}
	if r.PageS == nil {
		errs = append(errs, errors.New("no page fired"))
	}
	if r.TicketS != nil && !r.TicketNamesAppend {
		errs = append(errs, fmt.Errorf("the ticket's verdict does not name %s growing as n²: %q", appendFn, r.TicketVerdict))
	}
	if r.PageS != nil && !r.PageNamesAppend {
		errs = append(errs, fmt.Errorf("the page's verdict does not name %s growing as n²: %q", appendFn, r.PageVerdict))
	}
	return errors.Join(errs...)
}

func deref(v *float64) any {
	if v == nil {
		return "none"
	}
	return *v
}
