package strategies

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"burnlab/prometheus/rulegen/guard"
)

// A Signal is what a condition compares with its threshold, as a share of
// a window's streams.
type Signal int

const (
	// Burn is the SLO's error ratio over its budget: 1 spends the budget
	// in exactly the SLO period.
	Burn Signal = iota
	// Share5xx is the share of all streams the gateway answered with a 5xx
	// status. A stream reset after its 200 is not one.
	Share5xx
	// ShareSlow is the share of ok streams over 600 ms: the p99 is over
	// 600 ms exactly when it is over 1 %.
	ShareSlow
)

// A Condition is one alerting rule reduced to the arithmetic the workbook
// argues with: the signal over each window (all of them, for a
// multiwindow rule) against the threshold, held for For.
type Condition struct {
	Severity  string
	Signal    Signal
	Windows   []time.Duration
	Threshold float64
	Strict    bool // > rather than >=
	For       time.Duration
	// Guard, when set, is the window that must hold 1/(Threshold × budget)
	// streams for the condition to fire, so that one bad stream alone
	// cannot (prometheus/rulegen/guard).
	Guard time.Duration
}

// A Strategy is one way to alert on an SLO: its rules, as Prometheus
// evaluates them, and the same rules as conditions, for the expected
// values.
type Strategy struct {
	Key, Title string
	// Source says where the rule comes from, and what was scaled from the
	// workbook's 30 days to the window table's period.
	Source     string
	Conditions []Condition
	Groups     []rulefmt.RuleGroup
}

// Naive alerting on the gateway's metrics, as a team without SLOs writes
// it: not derived from any SLO, the same in every window table.
const (
	naive5xx = `sum(rate(gateway_upstream_errors_total{reason="status_5xx"}[5m]))
/
sum(rate(gateway_stream_duration_seconds_count{route="/v1/chat/stream"}[5m]))
> 0.01`
	naiveP99 = `histogram_quantile(0.99, sum by (le) (rate(gateway_stream_duration_seconds_bucket{route="/v1/chat/stream",outcome="ok"}[5m])))
> 0.6`
)

// All builds the naive alerts and the workbook's six approaches for one
// SLO of the spec under one window table. Approach 6 is Sloth's, generated
// from the spec by Sloth; the others are written from the
// table, so a different table changes every one of them.
func All(ctx context.Context, slothBin string, spec Spec, slo SLO, w Windows) ([]Strategy, error) {
	fiveMin := 5 * time.Minute
	out := []Strategy{
		single("naive-5xx", "5xx over 1 % for 5m", "what a team without SLOs writes: an error-rate threshold, here the gateway's 503s",
			Condition{Severity: "page", Signal: Share5xx, Windows: []time.Duration{fiveMin}, Threshold: 0.01, Strict: true, For: fiveMin}, naive5xx),
		single("naive-p99", "p99 over 600 ms for 5m", "what a team without SLOs writes: a latency threshold on the histogram's p99",
			Condition{Severity: "page", Signal: ShareSlow, Windows: []time.Duration{fiveMin}, Threshold: 0.01, Strict: true, For: fiveMin}, naiveP99),
	}
	// The workbook's windows are for 30 days; scale keeps each one's share
	// of the period, and no window goes under four scrapes.
	scale := func(of30d time.Duration) time.Duration {
		d := time.Duration(float64(of30d) * float64(w.Period) / float64(30*24*time.Hour))
		return max(d.Round(time.Second), 4*w.Scrape)
	}
	w1, w2, w3, for3 := scale(10*time.Minute), scale(36*time.Hour), scale(time.Minute), scale(time.Hour)
	quick := w.Pairs[0].Long
	k4 := 0.05 * float64(w.Period) / float64(quick)
	out = append(out,
		burnRule(slo, "1-target", "1. target error rate ≥ SLO threshold",
			fmt.Sprintf("workbook approach 1: error ratio over 10m of 30d (here %s) at or over the budget", dur(w1)),
			Condition{Severity: "page", Windows: []time.Duration{w1}, Threshold: 1}),
		burnRule(slo, "2-window", "2. increased alert window",
			fmt.Sprintf("workbook approach 2: 5 %% of the budget, a 36h window of 30d (here %s)", dur(w2)),
			Condition{Severity: "page", Windows: []time.Duration{w2}, Threshold: 1}),
		burnRule(slo, "3-duration", "3. incrementing alert duration",
			fmt.Sprintf("workbook approach 3: error ratio over 1m (here %s) at or over the budget for 1h of 30d (here %s)", dur(w3), dur(for3)),
			Condition{Severity: "page", Windows: []time.Duration{w3}, Threshold: 1, For: for3}),
	)
	// Approaches 4 and 5 read the table's own windows, which Sloth's SLI
	// recordings already hold: the workbook writes every approach over
	// such a recording (job:slo_errors_per_request:ratio_rate1h).
	recorded := func(win time.Duration) string {
		return fmt.Sprintf(`slo:sli_error:ratio_rate%s{sloth_id="%s-%s"}`, dur(win), spec.Service, slo.Name)
	}
	out = append(out,
		recordedRule(recorded, slo, "4-burn", "4. alert on burn rate",
			fmt.Sprintf("workbook approach 4: 5 %% of the budget in the table's quick page window %s, a burn of %.4g", dur(quick), k4),
			Condition{Severity: "page", Windows: []time.Duration{quick}, Threshold: k4}))
	var multi []Condition
	for _, p := range w.Pairs {
		multi = append(multi, Condition{Severity: p.Severity, Windows: []time.Duration{p.Long}, Threshold: p.Factor})
	}
	out = append(out, recordedRule(recorded, slo, "5-multi", "5. multiple burn-rate alerts",
		"workbook approach 5: each of the table's pairs on its long window alone", multi...))

	sloth, err := spec.Sloth(ctx, slothBin, w, slo.Name)
	if err != nil {
		return nil, err
	}
	// Approach 6 three ways: as burnlab ships it (Sloth's rules, each pair
	// guarded over its long window by make rules' prometheus/rulegen/guard), Sloth's
	// pairs alone, and a guard over the short window instead.
	var bare, long, short []Condition
	for _, p := range w.Pairs {
		c := Condition{Severity: p.Severity, Windows: []time.Duration{p.Short, p.Long}, Threshold: p.Factor, Strict: true}
		bare = append(bare, c)
		c.Guard = p.Long
		long = append(long, c)
		c.Guard = p.Short
		short = append(short, c)
	}
	out = append(out,
		Strategy{Key: Shipped, Title: "6. multiwindow, multi-burn-rate (shipped)",
			Source:     "workbook approach 6, as burnlab ships it: Sloth's rules generated from " + spec.Path + ", each pair guarded: its long window holds 1/(factor × budget) streams",
			Conditions: long, Groups: sloth},
		recordedRule(recorded, slo, "6-unguarded", "6. multiwindow, unguarded",
			"workbook approach 6 as Sloth writes it: the same pairs, with no minimum traffic", bare...),
		recordedRule(recorded, slo, "6-guard-short", "6. multiwindow, short-window guard",
			"workbook approach 6, each pair guarded over its short window instead: it holds 1/(factor × budget) streams", short...),
	)
	return out, nil
}

// ByKey finds the strategy of key among ss: the replay needs the shipped
// one, whatever variants sit beside it.
func ByKey(ss []Strategy, key string) (Strategy, error) {
	for _, s := range ss {
		if s.Key == key {
			return s, nil
		}
	}
	return Strategy{}, fmt.Errorf("no strategy %q", key)
}

func single(key, title, source string, c Condition, expr string) Strategy {
	return Strategy{Key: key, Title: title, Source: source, Conditions: []Condition{c},
		Groups: []rulefmt.RuleGroup{{Name: key, Rules: []rulefmt.Rule{alert(key, c, expr)}}}}
}

// burnRule writes conditions on the SLO's burn as alerting rules, each
// over the SLI's error ratio exactly as Sloth's spec states it.
func burnRule(slo SLO, key, title, source string, cs ...Condition) Strategy {
	return recordedRule(func(win time.Duration) string { return "(\n" + slo.Ratio(dur(win)) + "\n)" }, slo, key, title, source, cs...)
}

// recordedRule writes conditions on the SLO's burn as alerting rules, each
// over ratio's error ratio of a window.
func recordedRule(ratio func(time.Duration) string, slo SLO, key, title, source string, cs ...Condition) Strategy {
	s := Strategy{Key: key, Title: title, Source: source, Conditions: cs}
	g := rulefmt.RuleGroup{Name: key}
	for _, c := range cs {
		op := ">="
		if c.Strict {
			op = ">"
		}
		var terms []string
		for _, win := range c.Windows {
			terms = append(terms, fmt.Sprintf("%s %s %s * %s", ratio(win), op, num(c.Threshold), num(slo.Budget)))
		}
		// A recording's windows differ in their sloth_window label only.
		expr := strings.Join(terms, "\nand ignoring(sloth_window)\n")
		if c.Guard > 0 {
			expr += fmt.Sprintf("\nand on()\n%s >= %s", guard.Events(slo.TotalQuery, c.Guard), num(guard.MinEvents(c.Threshold, slo.Budget)))
		}
		g.Rules = append(g.Rules, alert(key, c, expr))
	}
	s.Groups = []rulefmt.RuleGroup{g}
	return s
}

func alert(key string, c Condition, expr string) rulefmt.Rule {
	return rulefmt.Rule{Alert: "Strategy_" + strings.ReplaceAll(key, "-", "_"), Expr: expr,
		For: model.Duration(c.For), Labels: map[string]string{"severity": c.Severity, "strategy": key, "window": dur(c.Windows[len(c.Windows)-1])}}
}

func dur(d time.Duration) string { return model.Duration(d).String() }

func num(f float64) string { return fmt.Sprintf("%g", f) }
