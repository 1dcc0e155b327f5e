package heapdelta

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// creep is the write-up's three days in twelve windows: 250 short streams
// of 300 events a window, and long generations of 8,000 events whose
// count climbs from under one to ten a window (4 in 100 streams). A
// function costing 40·n^k bytes per stream makes 40·Σn^k a window, off by
// up to noise of it (the heap profile's sampling).
func creep(k, noise float64, seed uint64) []Window {
	rng := rand.New(rand.NewPCG(seed, 1))
	var ws []Window
	at := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	for i := range 12 {
		short, long := 250.0, float64(1+i)*10/12
		const n1, n2 = 300.0, 8000.0
		ws = append(ws, Window{From: at, To: at.Add(10 * time.Second),
			SumN:  short*n1 + long*n2,
			SumN2: short*n1*n1 + long*n2*n2,
			Bytes: 40 * (short*math.Pow(n1, k) + long*math.Pow(n2, k)) * (1 + noise*(2*rng.Float64()-1)),
		})
		at = at.Add(30 * time.Second)
	}
	return ws
}

func TestFitGrowthTellsQuadraticFromLinear(t *testing.T) {
	for _, tc := range []struct {
		k           float64
		words, kind string
		// The fit is exact at 1 and 2; between them the mix of short and
		// long streams bends it a little.
		tolerance float64
	}{{2, "n^2.0", "quadratic", 0.05}, {1, "n^1.0", "linear", 0.05}, {1.5, "n^1.", "between linear and quadratic", 0.1}} {
		g := FitGrowth(appendFn, creep(tc.k, 0.03, 1))
		if !g.Fitted || math.Abs(g.Exponent-tc.k) > tc.tolerance || g.StdErr > 0.05 || g.R2 < 0.9 || g.Windows != 12 || g.Spread < MinSpread {
			t.Errorf("k=%v: %+v", tc.k, g)
		}
		if !strings.HasPrefix(g.Words, "transcript.(*Baseline).Append: bytes per stream grow as "+tc.words) ||
			!strings.Contains(g.Words, "over 12 delta windows): "+tc.kind) {
			t.Errorf("k=%v: %q", tc.k, g.Words)
		}
	}
}

// Lengths that spread little still tell n from n² when the counts are
// exact and the bytes follow them: a live creep's windows at its ticket
// spread 1.1–1.4x, the ordinary streams' Σn² diluting the long ones'.
func TestFitGrowthOnASmallSpread(t *testing.T) {
	for _, k := range []float64{1, 2} {
		// 250 ordinary streams of 740 events a window and two or three long
		// ones growing from 4,000 events to 6,100, bytes off by up to 1 %.
		rng := rand.New(rand.NewPCG(3, 3))
		var ws []Window
		for i := range 8 {
			long, nl := float64(2+i%2), 4000+300*float64(i)
			ws = append(ws, Window{SumN: 250*740 + long*nl, SumN2: 250*740*740 + long*nl*nl,
				Bytes: 40 * (250*math.Pow(740, k) + long*math.Pow(nl, k)) * (1 + 0.01*(2*rng.Float64()-1))})
		}
		g := FitGrowth(appendFn, ws)
		if !g.Fitted || math.Abs(g.Exponent-k) > 0.1 || g.Spread > 1.5 || g.Spread < MinSpread {
			t.Errorf("k=%v over a %.2fx spread: %+v", k, g.Spread, g)
		}
	}
}

// The fit says plainly when the data cannot carry it, rather than guess.
func TestFitGrowthSaysWhenItCannotFit(t *testing.T) {
	ws := creep(2, 0.03, 1)
	steady := make([]Window, len(ws))
	for i, w := range ws {
		w.SumN, w.SumN2, w.Bytes = ws[0].SumN, ws[0].SumN2, ws[0].Bytes*(1+0.01*float64(i%3))
		steady[i] = w
	}
	noisy := creep(2, 0, 1)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range noisy {
		noisy[i].Bytes = 1e9 * (0.5 + rng.Float64())
	}
	empty := creep(2, 0.03, 1)
	for i := 3; i < len(empty); i++ {
		empty[i].SumN, empty[i].SumN2 = 0, 0 // no stream ended in them
	}
	for name, tc := range map[string]struct {
		ws   []Window
		want string
	}{
		"three windows":   {ws[:3], "only 3 delta windows"},
		"idle windows":    {empty, "only 3 delta windows"},
		"no spread":       {steady, "hardly changed"},
		"not a power law": {noisy, "no verdict"},
		"none":            {nil, "only 0 delta windows"},
		"one window":      {ws[:1], "only 1 delta window holds"},
	} {
		g := FitGrowth(appendFn, tc.ws)
		if g.Fitted || !strings.Contains(g.Words, tc.want) || !strings.HasPrefix(g.Words, "transcript.(*Baseline).Append: ") {
			t.Errorf("%s: %+v, want not fitted and %q", name, g, tc.want)
		}
	}
}

// FunctionBytes reads a function's own bytes over the delta's window.
func TestFunctionBytes(t *testing.T) {
	s := sampleAt(t, time.Now(), map[string]float64{appendFn: 3 * MB, copyFn: 1 * MB})
	got, err := FunctionBytes(s, appendFn)
	if err != nil || math.Abs(got-30*MB) > 1e3 {
		t.Errorf("FunctionBytes = %v, %v; want 30 MB (3 MB/s over 10 s)", got, err)
	}
	if got, err := FunctionBytes(s, jsonFn); err != nil || got != 0 {
		t.Errorf("an absent function: %v, %v; want 0", got, err)
	}
	if _, err := FunctionBytes(Sample{From: s.From, To: s.To}, appendFn); err == nil {
		t.Error("an empty profile: want an error")
	}
}
