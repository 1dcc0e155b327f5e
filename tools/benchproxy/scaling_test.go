package benchproxy

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func TestFitPowerRecoversALaw(t *testing.T) {
	for _, want := range []float64{1, 2, 0.5} {
		var xs, ys []float64
		for _, n := range []float64{1000, 2000, 4000, 8000} {
			xs, ys = append(xs, n), append(ys, 3*math.Pow(n, want))
		}
		f, err := FitPower(xs, ys)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(f.Exponent-want) > 1e-9 || math.Abs(f.Coef-3) > 1e-6 || math.Abs(f.R2-1) > 1e-9 {
			t.Errorf("3·n^%v: fitted %+v, want exponent %v, coefficient 3, R² 1", want, f, want)
		}
	}
	// Scatter about n^2 lowers R² below 1 but keeps the slope near 2.
	f, err := FitPower([]float64{1, 2, 4, 8}, []float64{1.5, 3, 24, 50})
	if err != nil {
		t.Fatal(err)
	}
	if f.R2 >= 0.99 || f.R2 <= 0 || f.Exponent < 1.5 || f.Exponent > 2.5 {
		t.Errorf("scattered points: %+v, want a slope near 2 and 0 < R² < 0.99", f)
	}
}

func TestFitPowerRefusesWhatHasNoLaw(t *testing.T) {
	for name, c := range map[string][2][]float64{
		"two points":   {{1, 2}, {1, 4}},
		"one size":     {{5, 5, 5}, {1, 2, 3}},
		"a zero cost":  {{1, 2, 4}, {1, 0, 4}},
		"a negative n": {{-1, 2, 4}, {1, 2, 4}},
		"a NaN":        {{1, 2, 4}, {1, math.NaN(), 4}},
		"uneven":       {{1, 2, 4}, {1, 2}},
	} {
		if f, err := FitPower(c[0], c[1]); err == nil {
			t.Errorf("%s: fitted %+v, want an error", name, f)
		}
	}
}

func TestScalingConfigValidate(t *testing.T) {
	ok := ScalingConfig{Root: ".", Builds: []string{"fixed"}, Sizes: []int{1, 2, 4}, MinStreams: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for name, mut := range map[string]func(*ScalingConfig){
		"no root":         func(c *ScalingConfig) { c.Root = "" },
		"no build":        func(c *ScalingConfig) { c.Builds = nil },
		"unknown build":   func(c *ScalingConfig) { c.Builds = []string{"gateway-fixed"} },
		"a build twice":   func(c *ScalingConfig) { c.Builds = []string{"fixed", "fixed"} },
		"a huge size":     func(c *ScalingConfig) { c.Sizes = []int{1, 2, MaxScalingEvents + 1} },
		"two sizes":       func(c *ScalingConfig) { c.Sizes = []int{1, 2, 2} },
		"a zero size":     func(c *ScalingConfig) { c.Sizes = []int{0, 2, 4} },
		"no stream":       func(c *ScalingConfig) { c.MinStreams = 0 },
		"a negative wall": func(c *ScalingConfig) { c.MinWall = -time.Second },
	} {
		c := ok
		c.Sizes = append([]int(nil), ok.Sizes...)
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: %+v validated", name, c)
		}
	}
}

// TestScalingGate is the complexity gate in make test: the shipped (fixed)
// gateway's bytes per stream must grow about linearly with the stream, and
// the same check must stop the write-up's baseline, whose `out +=` makes
// them grow as n². Bytes, unlike times, do not depend on how busy the
// machine is, so the bounds are not loosened for noise; the sizes stop at
// 8,000 events to keep the baseline's streams to about a second.
func TestScalingGate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts both gateways")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log bytes.Buffer
	rep, err := RunScaling(ctx, ScalingConfig{Root: "../..", Builds: []string{"fixed", "baseline"},
		Sizes: []int{1000, 2000, 4000, 8000}, MinStreams: 2, MinWall: 300 * time.Millisecond, Seed: 1, Log: &log})
	if err != nil {
		t.Fatalf("RunScaling: %v\n%s", err, log.String())
	}
	var table strings.Builder
	if err := WriteScalingTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s", log.String(), table.String())
	if len(rep.Builds) != 2 || rep.Builds[0].Variant != "fixed" || rep.Builds[1].Variant != "baseline" {
		t.Fatalf("builds %+v, want fixed then baseline", rep.Builds)
	}
	fixed, baseline := rep.Builds[0], rep.Builds[1]
	if err := fixed.CheckAlloc(MaxAllocExponent); err != nil {
		t.Errorf("the shipped build fails the gate: %v", err)
	}
	err = baseline.CheckAlloc(MaxAllocExponent)
	if err == nil {
		t.Errorf("the gate passes the baseline (bytes ∝ n^%.2f): it would not have stopped the March code", baseline.AllocExponent)
	} else if !strings.Contains(err.Error(), "baseline") {
		t.Errorf("the gate's error does not name the build: %v", err)
	}
	// out += copies all that came before, every event: the baseline's
	// bytes lie on n² itself, not merely above n^1.2.
	if k, r2 := baseline.AllocExponent, baseline.AllocR2; k < 1.8 || k > 2.2 || r2 < 0.99 {
		t.Errorf("baseline: bytes grow as n^%.2f (R² %.3f), want about n² on a line", k, r2)
	}
	for _, b := range rep.Builds {
		for _, p := range b.Points {
			if p.Streams < 2 || p.AllocBytes <= 0 || p.CPUMsPerStream <= 0 {
				t.Errorf("%s at %d events: %+v, want two streams or more and positive costs", b.Variant, p.Events, p)
			}
		}
	}
}
