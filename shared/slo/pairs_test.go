package slo

import (
	"testing"
	"time"
)

func TestPairsRoundTrip(t *testing.T) {
	in := []Pair{{Short: 5 * time.Minute, Long: time.Hour, Factor: 14.4}, {Short: 30 * time.Minute, Long: 6 * time.Hour, Factor: 6}}
	s := FormatPairs(in)
	if s != "5m/1h over 14.4x; 30m/6h over 6x" {
		t.Fatalf("FormatPairs = %q", s)
	}
	out, err := ParsePairs(s)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("ParsePairs(%q) = %v, %v", s, out, err)
	}
}

// The annotation comes in an alert's payload: anything but the form is a
// clear error, never a pair half read.
func TestParsePairsRefusesWhatIsNotThem(t *testing.T) {
	for _, s := range []string{"", " ", "5m/1h", "5m/1h over", "5m/1h over x", "5m 1h over 6x", "5m/1h over 6", "1h/5m over 6x",
		"5m/1h over -6x", "5m/1h over NaNx", "5m/1h over 1e9x", "0s/1h over 6x", "5m/1h over 6x;", "5q/1h over 6x", "5m/1h over 6x; junk"} {
		if p, err := ParsePairs(s); err == nil {
			t.Errorf("ParsePairs(%q) = %v, want an error", s, p)
		}
	}
}

// The budget spent sums the steps with traffic over the whole period's
// allowance, and stays within SpentSteps steps however long the period;
// the history counts the steps recorded.
func TestSpentExpr(t *testing.T) {
	for _, c := range []struct {
		w, period     time.Duration
		spent, lasted string
	}{
		{30 * time.Second, 10 * time.Hour,
			`((sum_over_time((slo:sli_error:ratio_rate30s{sloth_id="x"} >= 0)[10h:18s]) * 18 / 36000 / on(sloth_id) group_left slo:error_budget:ratio{sloth_id="x"}) or on(sloth_id) (0 * count_over_time(slo:sli_error:ratio_rate30s{sloth_id="x"}[10h:18s])) or on(sloth_id) ((slo:sli_error:ratio_rate30s{sloth_id="x"} >= 0) * 18 / 36000 / on(sloth_id) group_left slo:error_budget:ratio{sloth_id="x"}) or on(sloth_id) (0 * slo:sli_error:ratio_rate30s{sloth_id="x"}))`,
			`((count_over_time(slo:sli_error:ratio_rate30s{sloth_id="x"}[10h:18s]) * 18) or on(sloth_id) (0 * slo:sli_error:ratio_rate30s{sloth_id="x"} + 18))`},
		{5 * time.Minute, 30 * 24 * time.Hour,
			`((sum_over_time((slo:sli_error:ratio_rate5m{sloth_id="x"} >= 0)[30d:21m36s]) * 1296 / 2592000 / on(sloth_id) group_left slo:error_budget:ratio{sloth_id="x"}) or on(sloth_id) (0 * count_over_time(slo:sli_error:ratio_rate5m{sloth_id="x"}[30d:21m36s])) or on(sloth_id) ((slo:sli_error:ratio_rate5m{sloth_id="x"} >= 0) * 1296 / 2592000 / on(sloth_id) group_left slo:error_budget:ratio{sloth_id="x"}) or on(sloth_id) (0 * slo:sli_error:ratio_rate5m{sloth_id="x"}))`,
			`((count_over_time(slo:sli_error:ratio_rate5m{sloth_id="x"}[30d:21m36s]) * 1296) or on(sloth_id) (0 * slo:sli_error:ratio_rate5m{sloth_id="x"} + 1296))`},
	} {
		if got := SpentExpr("x", c.w, c.period); got != c.spent {
			t.Errorf("SpentExpr(%s, %s) =\n%s\nwant\n%s", c.w, c.period, got, c.spent)
		}
		if got := HistoryExpr("x", c.w, c.period); got != c.lasted {
			t.Errorf("HistoryExpr(%s, %s) =\n%s\nwant\n%s", c.w, c.period, got, c.lasted)
		}
	}
	pairs := []Pair{{Short: 2 * time.Minute, Long: 4 * time.Minute}, {Short: 30 * time.Second, Long: time.Minute}}
	if s := Shortest(pairs); s != 30*time.Second {
		t.Errorf("Shortest = %s", s)
	}
}
