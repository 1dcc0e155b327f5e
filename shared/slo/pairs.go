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
