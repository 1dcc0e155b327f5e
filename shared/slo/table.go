package slo

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is one column of the comparison table: a phase of the repro or a
// load-generator report.
type Summary struct {
	Name       string
	P50, P99   time.Duration
	BreachRate float64
	BurnRate   float64
	// AllocBytes is the total allocation of the phase; 0 when not measured
	// (a load generator cannot see the gateway's heap), and the row is left out.
	AllocBytes uint64
}

// WriteUp is the write-up's own "What actually moved" table: its baseline
// and fixed columns, measured on its machine (allocations over its 25 s
// profile).
var WriteUp = [2]Summary{
	{Name: "baseline", P50: 293 * time.Millisecond, P99: 579 * time.Millisecond, BreachRate: 0.01, BurnRate: 10, AllocBytes: 245_930_000_000},
	{Name: "fixed", P50: 103 * time.Microsecond, P99: 579 * time.Microsecond, BreachRate: 0, BurnRate: 0, AllocBytes: 96_540_000_000},
}

// WriteTable prints the write-up's "What actually moved" table for a baseline
// and a fixed summary.
func WriteTable(w io.Writer, base, fixed Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Metric\t%s\t%s\tChange\n", titled(base.Name, "Baseline"), titled(fixed.Name, "Fixed"))
	fmt.Fprintf(tw, "p50 latency\t%s\t%s\t%s\n", FormatDuration(base.P50), FormatDuration(fixed.P50), speedup(base.P50, fixed.P50))
	fmt.Fprintf(tw, "p99 latency\t%s\t%s\t%s\n", FormatDuration(base.P99), FormatDuration(fixed.P99), speedup(base.P99, fixed.P99))
	fmt.Fprintf(tw, "SLO breach rate\t%s\t%s\t%s\n", percent(base.BreachRate), percent(fixed.BreachRate), budgetVerdict(fixed.BreachRate))
	fmt.Fprintf(tw, "Burn rate\t%.1f×\t%.1f×\t%s\n", base.BurnRate, fixed.BurnRate, pageVerdict(fixed.BurnRate))
	if base.AllocBytes > 0 || fixed.AllocBytes > 0 {
		fmt.Fprintf(tw, "Allocations\t%s\t%s\t%s\n", FormatBytes(base.AllocBytes), FormatBytes(fixed.AllocBytes), lessGarbage(base.AllocBytes, fixed.AllocBytes))
	}
	return tw.Flush()
}

func titled(name, fallback string) string {
	if name == "" {
		return fallback
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

func speedup(base, fixed time.Duration) string {
	switch {
	case base <= 0 || fixed <= 0:
		return "n/a"
	case fixed <= base:
		return fmt.Sprintf("%.0f× faster", float64(base)/float64(fixed))
	default:
		return fmt.Sprintf("%.1f× slower", float64(fixed)/float64(base))
	}
}

func percent(r float64) string { return fmt.Sprintf("%.1f %%", 100*r) }

func budgetVerdict(fixedRate float64) string {
	if fixedRate < 1-Objective {
		return fmt.Sprintf("below the %.1f %% budget", 100*(1-Objective))
	}
	return fmt.Sprintf("still at or above the %.1f %% budget", 100*(1-Objective))
}

// pageVerdict says whether the fixed build still spends budget at all: any
// burn above 1× exhausts it before the period ends.
func pageVerdict(fixedBurn float64) string {
	switch {
	case fixedBurn == 0:
		return "no page"
	case fixedBurn < 1:
		return "within budget"
	default:
		return "still burning budget"
	}
}

func lessGarbage(base, fixed uint64) string {
	if base == 0 || fixed == 0 {
		return "n/a"
	}
	if fixed <= base {
		return fmt.Sprintf("%.1f %% less garbage", 100*(1-float64(fixed)/float64(base)))
	}
	return fmt.Sprintf("%.0f %% more garbage", 100*(float64(fixed)/float64(base)-1))
}

// FormatDuration prints a latency in the unit the write-up uses for it.
func FormatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}

// FormatBytes prints a byte count in decimal units, as pprof's totals read.
func FormatBytes(b uint64) string {
	const unit = 1000
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	exp := int(math.Log(float64(b)) / math.Log(unit))
	if exp > 4 {
		exp = 4
	}
	return fmt.Sprintf("%.2f %cB", float64(b)/math.Pow(unit, float64(exp)), "kMGT"[exp-1])
}
