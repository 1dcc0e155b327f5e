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
// files carries (stack/burnfacts writes it): the alert's window pairs, so
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

// SpentExpr is the PromQL of the share of its error budget the SLO id
// spent over the last period: the mean of its error ratio over window w,
// taken at SpentSteps steps at most (at steps of w when the period holds
// fewer), over the steps that had traffic, divided by the budget. Sloth's
// slo:period_burn_rate:ratio is the same mean, but one step with no
// traffic (0/0: NaN) makes it NaN for a whole period, as a lab that
// starts idle is for its first ten hours; `>= 0` drops those steps. The
// bound keeps the query small enough for an annotation evaluated every
// few seconds while the alert fires (promtool's test engine refuses a
// 30-day subquery at 5-minute steps). A Prometheus younger than a step
// has no step with traffic; then the ratio over the longest window, which
// holds all its history, is the period's: `or on(sloth_id)`, since the
// two windows' recordings differ in their sloth_window label, and a plain
// `or` would return both. The expression is in
// parentheses whole, so that an arithmetic operator around it (100 * …)
// applies to either branch of its `or`, which binds loosest of PromQL's
// operators.
func SpentExpr(id string, w, longest, period time.Duration) string {
	step := max(w, (period / SpentSteps).Round(time.Second))
	budget := fmt.Sprintf(`on(sloth_id) group_left slo:error_budget:ratio{sloth_id=%q}`, id)
	return fmt.Sprintf(`((avg_over_time((slo:sli_error:ratio_rate%s{sloth_id=%q} >= 0)[%s:%s]) / %s) or on(sloth_id) (slo:sli_error:ratio_rate%s{sloth_id=%q} / %s))`,
		model.Duration(w), id, model.Duration(period), model.Duration(step), budget, model.Duration(longest), id, budget)
}

// SpentSteps bounds the steps SpentExpr averages over.
const SpentSteps = 2000

// Shortest and Longest are the shortest and the longest window of pairs
// (0 with none): the finest mean of the error ratio SpentExpr can take,
// and the window it falls back on.
func Shortest(pairs []Pair) time.Duration {
	var w time.Duration
	for _, p := range pairs {
		if w == 0 || p.Short < w {
			w = p.Short
		}
	}
	return w
}

// Longest is the longest window of pairs: see Shortest.
func Longest(pairs []Pair) time.Duration {
	var w time.Duration
	for _, p := range pairs {
		w = max(w, p.Long)
	}
	return w
}
