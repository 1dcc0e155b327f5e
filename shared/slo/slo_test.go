package slo

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBurnRate(t *testing.T) {
	for _, c := range []struct {
		breaches, total int
		want            float64
	}{{1, 100, 10}, {0, 100, 0}, {1, 1000, 1}, {0, 0, 0}, {100, 100, 1000}} {
		if got := BurnRate(c.breaches, c.total); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("BurnRate(%d, %d) = %v, want %v", c.breaches, c.total, got, c.want)
		}
	}
	if !slices.Contains(Buckets, Threshold.Seconds()) || !slices.IsSorted(Buckets) {
		t.Errorf("buckets %v must be sorted and include the %v threshold", Buckets, Threshold)
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	WriteTable(&b,
		Summary{Name: "baseline", P50: 293 * time.Millisecond, P99: 579 * time.Millisecond, BreachRate: .01, BurnRate: 10, AllocBytes: 245_930_000_000},
		Summary{Name: "fixed", P50: 103 * time.Microsecond, P99: 579 * time.Microsecond, AllocBytes: 96_540_000_000})
	for _, want := range []string{"Metric", "Baseline", "Fixed", "Change", "293 ms", "103 µs", "2845× faster", "1000× faster",
		"1.0 %", "below the 0.1 % budget", "10.0×", "no page", "245.93 GB", "60.7 % less garbage"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WriteTable(&b, Summary{P50: time.Second}, Summary{P50: 2 * time.Second, BreachRate: .5, BurnRate: 500})
	if strings.Contains(b.String(), "Allocations") || !strings.Contains(b.String(), "2.0× slower") || !strings.Contains(b.String(), "still burning") {
		t.Errorf("table without allocations:\n%s", b.String())
	}
}

// Each latency SLO's threshold must be a bucket bound of its histogram, or
// its le="…" SLI would read the nearest bound instead.
func TestBucketsHoldTheThresholds(t *testing.T) {
	for _, c := range []struct {
		name      string
		threshold float64
		buckets   []float64
	}{
		{"stream duration", Threshold.Seconds(), Buckets},
		{"TTFT", TTFTThreshold.Seconds(), TTFTBuckets},
		{"provider completion", CompletionThreshold.Seconds(), CompletionBuckets},
	} {
		if !slices.Contains(c.buckets, c.threshold) {
			t.Errorf("%s buckets %v lack the threshold %v", c.name, c.buckets, c.threshold)
		}
	}
	if Budget != 0.001 {
		t.Errorf("Budget = %v, want 0.001 exactly", Budget)
	}
}
