package strategies

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"go.yaml.in/yaml/v3"

	"burnlab/shared/slo"
)

// A Span is one stretch of firing of one strategy's alerts of a severity,
// in seconds since the backtest began; To is the first evaluation that
// found it resolved, or the end of the run for one still firing.
type Span struct {
	Severity string
	From, To time.Duration
	Open     bool // still firing when the run ended
}

// A History is a backtest's outcome: each strategy's firing spans, and
// the SLO's burn over time for the picture.
type History struct {
	Start, End time.Duration // the fault's start and the run's end
	Planned    time.Duration // the end before a quiet tail was cut
	Spans      map[string][]Span
	// Burn is the SLI's burn at each evaluation over the windows of the
	// shipped strategy's page pairs, and the true burn.
	Burn []BurnPoint
	// bad is the cumulative count of bad streams at each scrape.
	bad    []float64
	scrape time.Duration
}

// Spent is the share of the period's budget the bad streams between a
// and b spent, at rate streams a second.
func (h History) Spent(a, b time.Duration, rate, budget float64, period time.Duration) float64 {
	at := func(t time.Duration) float64 { return h.bad[min(len(h.bad)-1, int(t/h.scrape))] }
	return (at(b) - at(a)) / (budget * rate * period.Seconds())
}

// A BurnPoint is the burn at one evaluation: over each window named in
// Windows, and the fault's own (Truth).
type BurnPoint struct {
	At      time.Duration
	Windows map[string]float64
	Truth   float64
}

// An evalGroup is a loaded rule group and the strategy it belongs to.
type evalGroup struct {
	strategy string
	g        *rules.Group
}

// maxSamples is Prometheus's own default for --query.max-samples.
const maxSamples = 50_000_000

// A Case is where one cell of the table runs: the window table, the SLO,
// the incident and the traffic it comes at.
type Case struct {
	Windows  Windows
	SLO      SLO
	Incident Incident
	Traffic  Traffic
}

// Backtest evaluates every strategy's rules, with Prometheus's rule
// manager and PromQL engine, over the synthetic gateway's history of the
// incident at the traffic. That is the machinery `promtool test rules`
// runs, at the pinned version, driven here one evaluation at a time: the
// samples up to a time are appended to an in-memory TSDB, then each
// group is evaluated at that time, in the order its file states, and each
// alert's state is read. Nothing sleeps: a week takes seconds.
func Backtest(ctx context.Context, c Case, strats []Strategy, seed uint64) (History, error) {
	w, in := c.Windows, c.Incident
	start := w.Longest() + w.Eval // every window full of clean history
	var hold time.Duration
	for _, s := range strats {
		for _, c := range s.Conditions {
			hold = max(hold, c.For)
		}
	}
	end := start + in.Duration + w.Longest() + hold + 2*w.Eval
	trace := synthesize(in, c.Traffic, start, end, w.Scrape, seed)

	ev, err := newEvaluator(ctx, w, strats)
	if err != nil {
		return History{}, err
	}
	defer ev.close()
	st, order := ev.st, ev.order
	planned := end
	h := History{Start: start, End: end, Planned: planned, Spans: map[string][]Span{}, scrape: w.Scrape}
	for _, c := range trace.at {
		h.bad = append(h.bad, c.slow+c.fail503+c.failReset+c.ttftSlow)
	}
	open := map[[2]string]int{} // strategy, severity → index of its open span
	series := gatewaySeries()
	next := 0
	// Nothing fires in a clean history, and no rule keeps state but the
	// pending time of its `for`: evaluation begins a hold before the fault.
	from := max(0, start-hold-2*w.Eval).Truncate(w.Eval)
	for ts := from; ts <= end; ts += w.Eval {
		if err := ctx.Err(); err != nil {
			return History{}, err
		}
		app := st.Appender(ctx)
		for ; next < len(trace.at) && time.Duration(next)*w.Scrape <= ts; next++ {
			ms := (time.Duration(next) * w.Scrape).Milliseconds()
			for _, s := range series {
				if _, err := app.Append(0, s.labels, ms, s.value(trace.at[next])); err != nil {
					return History{}, fmt.Errorf("appending %s: %w", s.labels, err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			return History{}, err
		}
		firing, err := ev.eval(ctx, ts)
		if err != nil {
			return History{}, err
		}
		for k := range firing {
			if _, ok := open[k]; !ok {
				open[k] = len(h.Spans[k[0]])
				h.Spans[k[0]] = append(h.Spans[k[0]], Span{Severity: k[1], From: ts})
			}
		}
		for k, i := range open {
			if !firing[k] {
				h.Spans[k[0]][i].To = ts
				delete(open, k)
			}
		}
		// Once the fault is over no window's error ratio can rise again,
		// so with no alert pending or firing the rest of the run is quiet.
		if ts > start+in.Duration && !in.Healthy && !anyActive(order) {
			end = ts
			break
		}
	}
	h.End = end
	for k, i := range open {
		h.Spans[k[0]][i].To, h.Spans[k[0]][i].Open = end, true
	}
	for k := range h.Spans {
		slices.SortFunc(h.Spans[k], func(a, b Span) int { return int(a.From - b.From) })
	}
	burn, err := ev.burnOver(ctx, c, from, start, end)
	if err != nil {
		return History{}, err
	}
	h.Burn = burn
	return h, nil
}

// An evaluator is Prometheus's rule manager and PromQL engine over an
// in-memory TSDB, with every strategy's groups loaded in evaluation order.
type evaluator struct {
	dir    string
	st     *teststorage.TestStorage
	engine *promql.Engine
	order  []evalGroup
}

func newEvaluator(ctx context.Context, w Windows, strats []Strategy) (*evaluator, error) {
	dir, err := os.MkdirTemp("", "strategies-*")
	if err != nil {
		return nil, err
	}
	st, err := teststorage.NewWithError()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("backtest storage: %w", err)
	}
	ev := &evaluator{dir: dir, st: st, engine: promql.NewEngine(promql.EngineOpts{MaxSamples: maxSamples, Timeout: time.Minute})}
	mgr := rules.NewManager(&rules.ManagerOptions{
		QueryFunc: rules.EngineQueryFunc(ev.engine, st), AppendableV2: st, Queryable: st, Context: ctx,
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {}, Logger: promslog.NewNopLogger(),
	})
	for _, s := range strats {
		file := filepath.Join(dir, s.Key+".yml")
		b, err := yaml.Marshal(rulefmt.RuleGroups{Groups: s.Groups})
		if err == nil {
			err = os.WriteFile(file, b, 0o600)
		}
		if err != nil {
			ev.close()
			return nil, err
		}
		loaded, errs := mgr.LoadGroups(w.Eval, labels.EmptyLabels(), "", nil, false, file)
		if len(errs) > 0 {
			ev.close()
			return nil, fmt.Errorf("strategy %s: %w", s.Key, errs[0])
		}
		for _, g := range s.Groups {
			lg, ok := loaded[rules.GroupKey(file, g.Name)]
			if !ok {
				ev.close()
				return nil, fmt.Errorf("strategy %s: group %s did not load", s.Key, g.Name)
			}
			for _, r := range lg.Rules() {
				if ar, ok := r.(*rules.AlertingRule); ok {
					ar.SetRestored(true) // no restart to restore `for` state from
				}
			}
			ev.order = append(ev.order, evalGroup{s.Key, lg})
		}
	}
	// Groups that record go first, as the rules that read their series
	// are written to see this evaluation's values.
	slices.SortStableFunc(ev.order, func(a, b evalGroup) int { return records(b.g) - records(a.g) })
	return ev, nil
}

func (ev *evaluator) close() {
	ev.engine.Close()
	ev.st.Close()
	os.RemoveAll(ev.dir)
}

// eval evaluates every group at ts (since the Unix epoch) and says which
// strategy and severity fire.
func (ev *evaluator) eval(ctx context.Context, ts time.Duration) (map[[2]string]bool, error) {
	at := time.Unix(0, 0).Add(ts)
	firing := map[[2]string]bool{}
	for _, eg := range ev.order {
		eg.g.Eval(ctx, at)
		for _, r := range eg.g.Rules() {
			if err := r.LastError(); err != nil {
				return nil, fmt.Errorf("strategy %s, rule %s at %s: %w", eg.strategy, r.Name(), ts, err)
			}
			ar, ok := r.(*rules.AlertingRule)
			if !ok {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					firing[[2]string{eg.strategy, a.Labels.Get("severity")}] = true
				}
			}
		}
	}
	return firing, nil
}

func records(g *rules.Group) int {
	for _, r := range g.Rules() {
		if _, ok := r.(*rules.RecordingRule); ok {
			return 1
		}
	}
	return 0
}

func anyActive(gs []evalGroup) bool {
	for _, g := range gs {
		for _, r := range g.g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok && len(ar.ActiveAlerts()) > 0 {
				return true
			}
		}
	}
	return false
}

// burnOver reads the SLI's burn over the page pairs' windows at every
// evaluation, with one range query per window, next to the fault's own.
func (ev *evaluator) burnOver(ctx context.Context, c Case, from, start, end time.Duration) ([]BurnPoint, error) {
	w, o, in := c.Windows, c.SLO, c.Incident
	var pts []BurnPoint
	for ts := from; ts <= end; ts += w.Eval {
		pts = append(pts, BurnPoint{At: ts, Windows: map[string]float64{}, Truth: in.Share(ts-start) / o.Budget})
	}
	for _, win := range plotted(w) {
		q, err := ev.engine.NewRangeQuery(ctx, ev.st, nil, fmt.Sprintf("(%s) / %s", o.Ratio(dur(win)), num(o.Budget)),
			time.Unix(0, 0).Add(from), time.Unix(0, 0).Add(end), w.Eval)
		if err != nil {
			return nil, fmt.Errorf("burn over %s: %w", dur(win), err)
		}
		res := q.Exec(ctx)
		if res.Err != nil {
			q.Close()
			return nil, fmt.Errorf("burn over %s: %w", dur(win), res.Err)
		}
		m, err := res.Matrix()
		if err != nil {
			q.Close()
			return nil, fmt.Errorf("burn over %s: %w", dur(win), err)
		}
		for _, series := range m {
			for _, f := range series.Floats {
				if i := int((time.Duration(f.T)*time.Millisecond - from) / w.Eval); i >= 0 && i < len(pts) {
					pts[i].Windows[dur(win)] = f.F
				}
			}
		}
		q.Close()
	}
	return pts, nil
}

// plotted are the windows of the shipped strategy's page pairs.
func plotted(w Windows) []time.Duration {
	var out []time.Duration
	for _, p := range w.Pairs {
		if p.Severity == "page" && !slices.Contains(out, p.Short) {
			out = append(out, p.Short)
		}
		if p.Severity == "page" && !slices.Contains(out, p.Long) {
			out = append(out, p.Long)
		}
	}
	return out
}

var inf = math.Inf(1)

// leString writes a bucket bound as client_golang does.
func leString(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(le, 'f', -1, 64)
}

// A gatewayMetric is one series of the synthetic gateway and how its value
// follows from the stream counts.
type gatewayMetric struct {
	labels labels.Labels
	value  func(classes) float64
}

// How long each kind of stream takes, for the histograms: an ordinary one
// a few ms, one held at the end 1.2 s (the tail's hold), one whose first
// byte waited 400 ms a little over that.
const (
	fastStream    = 0.03
	slowStream    = 1.2
	delayedStream = 0.43
	fastTTFT      = 0.008
	delayedTTFT   = 0.4
)

// gatewaySeries are the series the gateway exports that any rule here
// reads, as scraped: the stream-duration histogram by outcome, the
// time-to-first-token histogram and the upstream errors by reason.
func gatewaySeries() []gatewayMetric {
	const route = "/v1/chat/stream"
	base := func(name string, kv ...string) labels.Labels {
		return labels.FromStrings(append([]string{"__name__", name, "job", "gateway", "instance", "gateway:6060", "route", route}, kv...)...)
	}
	ok := func(c classes) float64 { return c.total - c.fail503 - c.failReset }
	var out []gatewayMetric
	for _, le := range append(slices.Clone(slo.Buckets), inf) {
		out = append(out, gatewayMetric{base("gateway_stream_duration_seconds_bucket", "outcome", "ok", "le", leString(le)), func(c classes) float64 {
			v := 0.0
			if le >= fastStream {
				v += ok(c) - c.slow - c.ttftSlow
			}
			if le >= delayedStream {
				v += c.ttftSlow
			}
			if le >= slowStream {
				v += c.slow
			}
			return v
		}})
	}
	out = append(out,
		gatewayMetric{base("gateway_stream_duration_seconds_count", "outcome", "ok"), ok},
		gatewayMetric{base("gateway_stream_duration_seconds_count", "outcome", "upstream_error"), func(c classes) float64 { return c.fail503 + c.failReset }},
		gatewayMetric{labels.FromStrings("__name__", "gateway_upstream_errors_total", "job", "gateway", "instance", "gateway:6060", "reason", "status_5xx"),
			func(c classes) float64 { return c.fail503 }},
		gatewayMetric{labels.FromStrings("__name__", "gateway_upstream_errors_total", "job", "gateway", "instance", "gateway:6060", "reason", "reset"),
			func(c classes) float64 { return c.failReset }},
	)
	// A 503 has no first token; a reset stream had its first on time.
	first := func(c classes) float64 { return c.total - c.fail503 }
	for _, le := range append(slices.Clone(slo.TTFTBuckets), inf) {
		out = append(out, gatewayMetric{base("gateway_stream_ttft_seconds_bucket", "le", leString(le)), func(c classes) float64 {
			v := 0.0
			if le >= fastTTFT {
				v += first(c) - c.ttftSlow
			}
			if le >= delayedTTFT {
				v += c.ttftSlow
			}
			return v
		}})
	}
	return append(out, gatewayMetric{base("gateway_stream_ttft_seconds_count"), first})
}
