package slo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// A Pair is one window pair of a multi-window burn-rate alert: the alert
// fires through it when the SLI's burn rate over both Short and Long is
// above Factor. A burn rate is the error ratio over a window divided by
// the error budget: 1 spends exactly the budget over the SLO period.
type Pair struct {
	Short, Long time.Duration
	Factor      float64
}

// String is the pair as the burn_windows annotation writes it:
// "2m/4m over 6x".
func (p Pair) String() string {
	return fmt.Sprintf("%s/%s over %sx", model.Duration(p.Short), model.Duration(p.Long), strconv.FormatFloat(p.Factor, 'f', -1, 64))
}

// PairsAnnotation is the annotation every Sloth alert of burnlab's rule
// files carries (prometheus/rulegen/burnfacts writes it): the alert's window pairs, so
// the pager can read their burn from Prometheus without parsing PromQL.
const PairsAnnotation = "burn_windows"

// FormatPairs writes pairs as the burn_windows annotation does:
// "30s/1m over 14.4x; 2m/4m over 6x".
func FormatPairs(pairs []Pair) string {
	s := make([]string, len(pairs))
	for i, p := range pairs {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// ParsePairs reads a burn_windows annotation. It comes in an alert's
// payload, so anything else is an error that says what it wanted.
func ParsePairs(s string) ([]Pair, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no window pairs")
	}
	var out []Pair
	for part := range strings.SplitSeq(s, ";") {
		windows, factor, ok := strings.Cut(strings.TrimSpace(part), " over ")
		short, long, ok2 := strings.Cut(windows, "/")
		f, ok3 := strings.CutSuffix(factor, "x")
		if !ok || !ok2 || !ok3 {
			return nil, fmt.Errorf("window pair %.60q: want <short>/<long> over <factor>x", part)
		}
		var p Pair
		var err error
		if p.Short, err = parseWindow(short); err != nil {
			return nil, err
		}
		if p.Long, err = parseWindow(long); err != nil {
			return nil, err
		}
		if p.Factor, err = strconv.ParseFloat(f, 64); err != nil || !(p.Factor > 0) || p.Factor > 1e6 {
			return nil, fmt.Errorf("window pair %.60q: factor %.20q is not a number above 0", part, f)
		}
		if p.Short > p.Long {
			return nil, fmt.Errorf("window pair %.60q: the short window is longer than the long one", part)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseWindow(s string) (time.Duration, error) {
	d, err := model.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("window %.20q is not a Prometheus duration above 0", s)
	}
	return time.Duration(d), nil
}

// SpentExpr is the PromQL of the share of the whole period's error budget
// the SLO id has spent so far: the bad events of the period over the bad
// events the budget allows in all of it. With r the error ratio over
// window w, sampled every s = P ÷ SpentSteps, that is Σ r·s ÷ (P × budget):
// each sample stands for the s before it, at the traffic the period has
// had on average, and the figure lags the burn by up to a step and half a
// window. A step with no traffic (0/0: NaN, dropped by `>= 0`) and the
// part of the period before Prometheus's history began count as no error;
// that part is what makes a fresh lab that burns at 10x for its first 4
// minutes read as 10 × 4m ÷ 10h ≈ 7 % spent, not as ten budgets. The step
// does not depend on w, so that a page and a ticket of one SLO, read over
// windows of their own, say the same figure to within their windows'
// smoothing. With a history but no sample of traffic yet, it is 0: `or
// on(sloth_id) 0 * count_over_time(…)`, on(sloth_id) since the two sides'
// labels differ. A series younger than a step has no step yet (the steps
// are at multiples of s, the first may come before the first sample),
// and an alert can fire in that gap; its ratio now then stands for the
// one step, as every other sample does, or 0 without traffic. The bound on steps keeps the query small enough for an
// annotation evaluated every few seconds while the alert fires (promtool's
// test engine refuses a 30-day subquery at 5-minute steps). The expression
// is in parentheses whole, so that an arithmetic operator around it
// (100 * …) applies to either branch of its `or`, which binds loosest of
// PromQL's operators.
func SpentExpr(id string, w, period time.Duration) string {
	return SpentExprOf(fmt.Sprintf("sloth_id=%q", id), w, period)
}

// SpentExprOf is SpentExpr for every SLO whose Sloth recordings the
// matchers pick (sloth_service="llm-gateway": all of its SLOs), one
// series per sloth_id.
func SpentExprOf(matchers string, w, period time.Duration) string {
	s := spentStep(period)
	ratio := fmt.Sprintf(`slo:sli_error:ratio_rate%s{%s}`, model.Duration(w), matchers)
	perStep := fmt.Sprintf(`* %d / %d / on(sloth_id) group_left slo:error_budget:ratio{%s}`, int64(s.Seconds()), int64(period.Seconds()), matchers)
	steps := fmt.Sprintf(`[%s:%s]`, model.Duration(period), model.Duration(s))
	return fmt.Sprintf(`((sum_over_time((%s >= 0)%s) %s) or on(sloth_id) (0 * count_over_time(%s%s)) or on(sloth_id) ((%s >= 0) %s) or on(sloth_id) (0 * %s))`,
		ratio, steps, perStep, ratio, steps, ratio, perStep, ratio)
}

// HistoryExpr is the PromQL of the seconds of the period SpentExpr rests
// on: the steps at which the SLO's error ratio was recorded, with traffic
// or without, times the step. Under a period of history, what the budget
// figures say is "over the last 4m of a 10h period". A series younger than
// a step has one, as SpentExpr counts it.
func HistoryExpr(id string, w, period time.Duration) string {
	s := spentStep(period)
	ratio := fmt.Sprintf(`slo:sli_error:ratio_rate%s{sloth_id=%q}`, model.Duration(w), id)
	return fmt.Sprintf(`((count_over_time(%s[%s:%s]) * %d) or on(sloth_id) (0 * %s + %d))`,
		ratio, model.Duration(period), model.Duration(s), int64(s.Seconds()), ratio, int64(s.Seconds()))
}

// spentStep is the step of SpentExpr's and HistoryExpr's subqueries.
func spentStep(period time.Duration) time.Duration {
	return max(time.Second, (period / SpentSteps).Round(time.Second))
}

// SpentSteps bounds the steps SpentExpr sums over.
const SpentSteps = 2000

// Shortest is the shortest window of pairs (0 with none): the finest
// error ratio SpentExpr can sum.
func Shortest(pairs []Pair) time.Duration {
	var w time.Duration
	for _, p := range pairs {
		if w == 0 || p.Short < w {
			w = p.Short
		}
	}
	return w
}
