// Package promfacts reads from Prometheus what a person paged by an SLO
// burn-rate alert asks first: how fast the error budget burned over each
// window pair of the alert when it fired, how much budget is left and how
// long it lasts at that burn, and which requests were slowest; and, for
// the incident's chart, the burn over time. It reads Sloth's recording
// rules (slo:sli_error:ratio_rate<W>, slo:error_budget:ratio,
// slo:time_period:days; the budget spent as shared/slo.SpentExpr) and the exemplars
// Prometheus keeps, through client_golang's API client.
//
// Terms: an SLO's error budget B is the share of events it may fail (0.1 %
// for 99.9 %); the burn rate over a window W is the error ratio over W
// divided by B, so 1 spends the budget exactly over the SLO period. A
// Sloth page alert is an OR of window pairs (slo.Pair): it fires through a
// pair when the burn over both its windows is above the pair's factor.
package promfacts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"burnlab/pager/internal/burnchart"
	"burnlab/shared/incident"
	"burnlab/shared/slo"
)

// The annotations and label the facts are read by. burn_windows is
// slo.PairsAnnotation.
const (
	// ExemplarsAnnotation names the series selector whose exemplars are
	// the alert's requests, e.g.
	// gateway_stream_duration_seconds_bucket{route="/v1/chat/stream"}.
	ExemplarsAnnotation = "exemplars"
	// SlothIDLabel is the label Sloth puts on its alerts and recordings:
	// the SLO's ID, which every query here selects by.
	SlothIDLabel = "sloth_id"
)

// MaxSlowest is how many of the slowest requests are kept: a page's worth
// to read, enough to see whether one tenant or all of them are slow.
const MaxSlowest = 10

// Client reads Prometheus's HTTP API.
type Client struct {
	api v1.API
	url string
	hc  *http.Client
}

// New returns a Client of the Prometheus at rawURL (http://host:9090),
// with hc (nil: a client of its own).
func New(rawURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the Prometheus URL %q: want http(s)://host:port", rawURL)
	}
	c, err := api.NewClient(api.Config{Address: rawURL, Client: hc})
	if err != nil {
		return nil, fmt.Errorf("the Prometheus URL %q: %w", rawURL, err)
	}
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{api: v1.NewAPI(c), url: strings.TrimRight(rawURL, "/"), hc: hc}, nil
}

// maxTargetsBytes bounds the targets list read: a cluster's can be large,
// but tens of MB of active targets are far past the max_targets a rule
// takes.
const maxTargetsBytes = 32 << 20

// Targets lists Prometheus's active scrape targets (targets.Discovery):
// the pager config's rules find the processes of their jobs in it. It
// asks for the active ones only (client_golang's API client asks for all,
// and a cluster's dropped targets can be most of them) and reads at most
// maxTargetsBytes.
func (c *Client) Targets(ctx context.Context) (v1.TargetsResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/api/v1/targets?state=active", nil)
	if err != nil {
		return v1.TargetsResult{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return v1.TargetsResult{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTargetsBytes+1))
	switch {
	case err != nil:
		return v1.TargetsResult{}, fmt.Errorf("reading the targets: %w", err)
	case len(body) > maxTargetsBytes:
		return v1.TargetsResult{}, fmt.Errorf("the active targets are over %d bytes", maxTargetsBytes)
	case resp.StatusCode != http.StatusOK:
		return v1.TargetsResult{}, fmt.Errorf("the targets: %.100q", resp.Status)
	}
	var r struct {
		Status string           `json:"status"`
		Data   v1.TargetsResult `json:"data"`
		Error  string           `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		return v1.TargetsResult{}, fmt.Errorf("the targets: status %q, %.200q (%v)", r.Status, r.Error, err)
	}
	return r.Data, nil
}

// URL is the Prometheus the Client reads.
func (c *Client) URL() string { return c.url }

// Alert is what the facts of a page are read for: its labels' and
// annotations' parts, and its start.
type Alert struct {
	// SlothID is the sloth_id label; Windows the burn_windows annotation
	// and Exemplars the exemplars one.
	SlothID, Windows, Exemplars string
	// StartsAt is when the alert started firing: the moment its rule
	// found the burn, which every figure is read as of.
	StartsAt time.Time
}

// AlertOf is the Alert of an alert's labels, annotations and start.
func AlertOf(labels, annotations map[string]string, startsAt time.Time) Alert {
	return Alert{SlothID: labels[SlothIDLabel], Windows: annotations[slo.PairsAnnotation], Exemplars: annotations[ExemplarsAnnotation], StartsAt: startsAt}
}

// slothID is what a sloth_id must look like before it goes into a query:
// it comes in a webhook's payload, and a quote or a brace in it would
// change the query.
var slothID = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)

// selector is what the exemplars annotation must be: one metric name and
// its matchers, no functions or operators, since it is sent to Prometheus
// as a query and comes in a payload too.
var selector = regexp.MustCompile(`^[A-Za-z_:][A-Za-z0-9_:]*(\{[^{}]*\})?$`)

// Pairs reads the alert's window pairs (its burn_windows annotation).
func (a Alert) Pairs() ([]slo.Pair, error) {
	p, err := slo.ParsePairs(a.Windows)
	if err != nil {
		return nil, fmt.Errorf("the alert's %s annotation %.80q: %w", slo.PairsAnnotation, a.Windows, err)
	}
	return p, nil
}

// Facts reads the alert's facts from Prometheus, as of its start: the burn
// of each pair, the budget and the slowest requests. It fills Pairs, Pair,
// Budget, BurnFrom, ExemplarQuery, Slowest and Errors; nothing that fails
// stops the rest, and each failure is one line of Errors. ctx bounds it
// all. c may be nil (no Prometheus): then only the pairs are listed, with
// no burn.
func (c *Client) Facts(ctx context.Context, a Alert) incident.Facts {
	f := incident.Facts{Pair: -1}
	pairs, err := a.Pairs()
	if err != nil {
		f.Errors = append(f.Errors, err.Error()+": no window pairs to read the burn over")
	}
	// The pairs are listed, and the slowest chosen, whatever Prometheus
	// says: the heap's burn window needs one.
	f.Pairs, f.Pair = pairBurns(pairs, nil), Choose(pairs, nil)
	if f.Pair >= 0 {
		f.BurnFrom = a.StartsAt.Add(-pairs[f.Pair].Long)
	}
	switch {
	case c == nil:
		f.Errors = append(f.Errors, "the pager runs without -prometheus-url: no burn, budget or slowest requests")
		return f
	case !slothID.MatchString(a.SlothID):
		f.Errors = append(f.Errors, fmt.Sprintf("the alert's %s label %.80q is not a plain SLO ID: nothing read from Prometheus", SlothIDLabel, a.SlothID))
		return f
	}

	// Each window once, though pairs may share one.
	burns := map[time.Duration]*float64{}
	var burnErr error
	for _, p := range pairs {
		for _, w := range []time.Duration{p.Short, p.Long} {
			if _, ok := burns[w]; ok {
				continue
			}
			v, err := c.instant(ctx, BurnExpr(w, a.SlothID), a.StartsAt)
			if err != nil && burnErr == nil {
				burnErr = fmt.Errorf("the burn over %s: %w", model.Duration(w), err)
			}
			burns[w] = v
		}
	}
	if burnErr != nil {
		f.Errors = append(f.Errors, burnErr.Error())
	}
	f.Pairs, f.Pair = pairBurns(pairs, burns), Choose(pairs, burns)
	var long time.Duration
	var b *float64
	if f.Pair >= 0 {
		long = pairs[f.Pair].Long
		b = burns[long]
		from, err := c.burnStart(ctx, a.SlothID, pairs[f.Pair], a.StartsAt)
		if err != nil {
			f.Errors = append(f.Errors, "when the burn began: "+err.Error()+"; the burn window is taken as the long window's")
		} else {
			f.BurnFrom = from
		}
	}

	budget, err := c.budget(ctx, a.SlothID, a.StartsAt, pairs, b, long)
	if err != nil {
		f.Errors = append(f.Errors, "the budget: "+err.Error())
	}
	f.Budget = budget

	switch {
	case a.Exemplars == "":
		// Not an error: only an SLO whose histogram carries exemplars
		// names a series; the page says so.
	case !selector.MatchString(a.Exemplars) || len(a.Exemplars) > 512:
		f.Errors = append(f.Errors, fmt.Sprintf("the alert's %s annotation %.80q is not a series selector: no slowest requests", ExemplarsAnnotation, a.Exemplars))
	case f.Pair < 0:
		f.ExemplarQuery = a.Exemplars
		f.Errors = append(f.Errors, "no window pair to look for the slowest requests in")
	default:
		f.ExemplarQuery = a.Exemplars
		slowest, err := c.slowest(ctx, a.Exemplars, f.BurnFrom, a.StartsAt)
		if err != nil {
			f.Errors = append(f.Errors, "the slowest requests: "+err.Error())
		}
		f.Slowest = slowest
		// The SLI counts a stream when it ends, so a slow stream counted
		// in the burn began its duration earlier, with the fault already
		// there: the burn began no later than the earliest such start.
		// Without this a burn of long streams (the regression's take
		// seconds) seems to begin seconds after its load did, and the heap
		// profile "before" it is one of the burn's own.
		for _, e := range slowest {
			if began := e.At.Add(-time.Duration(e.Seconds * float64(time.Second))); !e.At.IsZero() && began.Before(f.BurnFrom) {
				f.BurnFrom = began
			}
		}
	}
	return f
}

// BurnExpr is the PromQL of the burn over window w of the SLO id: Sloth's
// error ratio over w divided by its error budget.
func BurnExpr(w time.Duration, id string) string {
	return fmt.Sprintf(`slo:sli_error:ratio_rate%s{sloth_id=%q} / on(sloth_id) group_left slo:error_budget:ratio{sloth_id=%q}`, model.Duration(w), id, id)
}

// pairBurns is the pairs with their burns (nil: unread) and whether each
// fired.
func pairBurns(pairs []slo.Pair, burns map[time.Duration]*float64) []incident.PairBurn {
	out := make([]incident.PairBurn, len(pairs))
	for i, p := range pairs {
		s, l := burns[p.Short], burns[p.Long]
		out[i] = incident.PairBurn{Short: model.Duration(p.Short).String(), Long: model.Duration(p.Long).String(),
			ShortBurn: s, LongBurn: l, Factor: p.Factor, Fired: fired(p, burns)}
	}
	return out
}

func fired(p slo.Pair, burns map[time.Duration]*float64) bool {
	s, l := burns[p.Short], burns[p.Long]
	return s != nil && l != nil && *s > p.Factor && *l > p.Factor
}

// Choose is the index of the pair the facts are read over: the first that
// fired (the fastest, as Sloth orders them, and as the burn_rate
// annotation picks), or with none over its factor the slowest, the one
// with the longest long window, whose burn says most about the period; -1
// with no pairs. burns may be nil.
func Choose(pairs []slo.Pair, burns map[time.Duration]*float64) int {
	if len(pairs) == 0 {
		return -1
	}
	if i := slices.IndexFunc(pairs, func(p slo.Pair) bool { return fired(p, burns) }); i >= 0 {
		return i
	}
	slowest := 0
	for i, p := range pairs {
		if p.Long > pairs[slowest].Long {
			slowest = i
		}
	}
	return slowest
}

// budget reads the budget as of at, and how long it lasts at burn b (over
// window w); see incident.Budget for the formulas. It returns nil when
// Prometheus has no budget spent to tell.
func (c *Client) budget(ctx context.Context, id string, at time.Time, pairs []slo.Pair, b *float64, w time.Duration) (*incident.Budget, error) {
	shortest := slo.Shortest(pairs)
	days, err := c.instant(ctx, fmt.Sprintf(`slo:time_period:days{sloth_id=%q}`, id), at)
	if err != nil {
		return nil, fmt.Errorf("slo:time_period:days: %w", err)
	}
	if days == nil || !(*days > 0) || shortest <= 0 {
		return nil, errors.New("no SLO period (slo:time_period:days) or window pair in Prometheus at the alert's start")
	}
	period := time.Duration(*days * 24 * float64(time.Hour)).Round(time.Second)
	spent, err := c.instant(ctx, slo.SpentExpr(id, shortest, period), at)
	if err != nil {
		return nil, fmt.Errorf("the budget spent: %w", err)
	}
	if spent == nil {
		return nil, fmt.Errorf("no error ratio of the SLO over its %s window in the last %s", model.Duration(shortest), model.Duration(period))
	}
	history, err := c.instant(ctx, slo.HistoryExpr(id, shortest, period), at)
	if err != nil {
		return nil, fmt.Errorf("the budget's history: %w", err)
	}
	out := &incident.Budget{SpentPct: 100 * *spent, LeftPct: 100 - 100**spent, Burn: b}
	if w > 0 {
		out.BurnWindow = model.Duration(w).String()
	}
	out.Period, out.PeriodSeconds = model.Duration(period).String(), period.Seconds()
	if history != nil {
		h := time.Duration(*history * float64(time.Second)).Round(time.Second)
		out.History, out.HistorySeconds = model.Duration(h).String(), h.Seconds()
	}
	left := 1 - *spent
	switch {
	case left <= 0:
		out.RunsOut = "none left"
	case b == nil:
		out.RunsOut = "unknown: no burn over the " + cmp.Or(out.BurnWindow, "long") + " window"
	case *b <= 0:
		out.RunsOut = "not at this burn"
	default:
		s := left * period.Seconds() / *b
		out.RunsOutSeconds = &s
		out.RunsOut = (time.Duration(s * float64(time.Second))).Round(time.Second).String()
	}
	return out, nil
}

// instant is the value of query at t: the largest of the series it
// returns, or nil when there is none, or only NaN (no traffic in the
// window is 0/0) or infinities (a share of a process that used no CPU is
// x/0; a quantile past the last bucket is +Inf), which say nothing and
// which JSON, and so the journal, cannot hold.
func (c *Client) instant(ctx context.Context, query string, t time.Time) (*float64, error) {
	v, _, _, err := c.api.Query(ctx, query, t)
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: Prometheus answered a %s, want a vector", query, v.Type())
	}
	var out *float64
	for _, s := range vec {
		if x := float64(s.Value); !math.IsNaN(x) && !math.IsInf(x, 0) && (out == nil || x > *out) {
			out = &x
		}
	}
	return out, nil
}

// slowest reads the exemplars of sel from from to to, and keeps the
// MaxSlowest slowest, one per request ID.
func (c *Client) slowest(ctx context.Context, sel string, from, to time.Time) ([]incident.Exemplar, error) {
	res, err := c.api.QueryExemplars(ctx, sel, from, to)
	if err != nil {
		return nil, err
	}
	var all []incident.Exemplar
	for _, r := range res {
		for _, e := range r.Exemplars {
			if v := float64(e.Value); !math.IsNaN(v) {
				all = append(all, incident.Exemplar{RequestID: string(e.Labels["request_id"]), Tenant: string(e.Labels["tenant"]),
					Seconds: v, At: e.Timestamp.Time().UTC()})
			}
		}
	}
	return Slowest(all, MaxSlowest), nil
}

// Slowest sorts exemplars slowest first (the earlier first among equals),
// keeps each request ID's slowest (an exemplar without one is kept as it
// is), and returns at most n of them, never nil.
func Slowest(all []incident.Exemplar, n int) []incident.Exemplar {
	slices.SortStableFunc(all, func(a, b incident.Exemplar) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), a.At.Compare(b.At))
	})
	out := []incident.Exemplar{}
	seen := map[string]bool{}
	for _, e := range all {
		if len(out) == n {
			break
		}
		if e.RequestID != "" {
			if seen[e.RequestID] {
				continue
			}
			seen[e.RequestID] = true
		}
		out = append(out, e)
	}
	return out
}

// burnStart is when the burn that fired the alert began: the last step,
// up to twice the pair's long window before the alert's start, at which
// the burn over its short window began the rise that took it over 1 (the
// budget's own pace): 0, no value (no traffic) or the steady rate before
// it; less one step, since
// Prometheus sees a change a scrape late. The long window alone would reach back past the
// burn's start whenever the alert fires sooner than it (a 10x burn fires
// the lab's 2m/4m pair after about 2.5 minutes), and a heap profile from
// "before" would then hold the burn. A burn that lasts the whole span
// began at least that long ago: its start is the span's.
func (c *Client) burnStart(ctx context.Context, id string, p slo.Pair, at time.Time) (time.Time, error) {
	to := at.Truncate(time.Second)
	from := to.Add(-2 * p.Long)
	step := max(p.Long/48, 5*time.Second).Truncate(time.Second)
	v, _, _, err := c.api.QueryRange(ctx, BurnExpr(p.Short, id), v1.Range{Start: from, End: to, Step: step})
	if err != nil {
		return time.Time{}, err
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return time.Time{}, fmt.Errorf("the query answered a %s from Prometheus, want a matrix", v.Type())
	}
	pts := onGrid(m, from, to, step)
	// A short window that is not burning at the alert's start (no data,
	// or at most 1) cannot say when the burn began: the long window's
	// reach is the guess.
	if n := len(pts); n == 0 || !burning(pts[n-1].V) {
		return at.Add(-p.Long), nil
	}
	i := len(pts) - 1
	for i >= 0 && burning(pts[i].V) {
		i--
	}
	if i < 0 {
		return from, nil
	}
	// At pts[i] the short window may already count some of the burn's
	// errors, too few to lift it over 1: with the provider's 25 answers a
	// second, the 2m window needs four slow ones, which its long answers
	// bring every 4 s, so the burn crossed 1 some 12 s after it began, and
	// the heap's "before" held the burn's first answers. The burn began
	// where its rise did: the walk goes back while the step before is
	// lower or had no traffic, and stops at a step that counted no error,
	// or no higher than the one before (a steady rate of errors the
	// service always has, or an earlier burn's tail). Every error counted
	// at pts[i] came within one short window of it, so the walk goes no
	// further back than that.
	stop := max(i-int(p.Short/step), 0)
	for i > stop && pts[i].V > 0 && !(pts[i-1].V >= pts[i].V) {
		i--
	}
	return pts[i].T.Add(-step), nil
}

// burning says whether a burn spends the budget faster than its own pace.
func burning(x float64) bool { return !math.IsNaN(x) && x > 1 }

// ChartSteps is about how many points a burn chart's series has: more
// than the chart's pixel columns would only be thinned away.
const ChartSteps = 240

// Burn reads the burn over the pair's short and long windows from from to
// to, in about ChartSteps steps, for a chart. A step Prometheus has no
// value for is NaN, a gap in the line.
func (c *Client) Burn(ctx context.Context, id string, p slo.Pair, from, to time.Time) (short, long burnchart.Series, err error) {
	if !slothID.MatchString(id) {
		return short, long, fmt.Errorf("the alert's %s label %.80q is not a plain SLO ID", SlothIDLabel, id)
	}
	// Whole seconds, so the steps Prometheus answers fall on the grid
	// onGrid lays out.
	from, to = from.Truncate(time.Second), to.Truncate(time.Second)
	step := max(to.Sub(from)/ChartSteps, time.Second).Truncate(time.Second)
	r := v1.Range{Start: from, End: to, Step: step}
	series := func(w time.Duration, which string) (burnchart.Series, error) {
		s := burnchart.Series{Name: fmt.Sprintf("%s (%s)", model.Duration(w), which)}
		v, _, _, err := c.api.QueryRange(ctx, BurnExpr(w, id), r)
		if err != nil {
			return s, fmt.Errorf("the burn over %s: %w", model.Duration(w), err)
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return s, fmt.Errorf("the burn over %s: Prometheus answered a %s, want a matrix", model.Duration(w), v.Type())
		}
		s.Points = onGrid(m, from, to, step)
		return s, nil
	}
	if short, err = series(p.Short, "short"); err != nil {
		return short, long, err
	}
	long, err = series(p.Long, "long")
	return short, long, err
}

// onGrid is the matrix's values on the steps from from to to: the largest
// of its series at each, NaN where none has one.
func onGrid(m model.Matrix, from, to time.Time, step time.Duration) []burnchart.Point {
	at := map[int64]float64{}
	for _, s := range m {
		for _, v := range s.Values {
			x := float64(v.Value)
			if old, ok := at[int64(v.Timestamp)]; !ok || x > old || math.IsNaN(old) {
				at[int64(v.Timestamp)] = x
			}
		}
	}
	var out []burnchart.Point
	for t := from; !t.After(to); t = t.Add(step) {
		v, ok := at[int64(model.TimeFromUnixNano(t.UnixNano()))]
		if !ok {
			v = math.NaN()
		}
		out = append(out, burnchart.Point{T: t, V: v})
	}
	return out
}
