package calibrate

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func curveProbe(c Curve) Probe {
	return func(_ context.Context, n int) (time.Duration, error) { return c.At(n), nil }
}

func TestFitRecoversAQuadratic(t *testing.T) {
	want := Curve{A: 10.6e-9, B: 2e-6, C: 1e-3}
	pts, err := Measure(context.Background(), curveProbe(want), []int{1000, 2000, 4000, 6000}, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Fit(pts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]float64{{got.A, want.A}, {got.B, want.B}, {got.C, want.C}} {
		if math.Abs(p[0]-p[1]) > 1e-3*math.Abs(p[1])+1e-9 {
			t.Fatalf("fit %+v, want %+v", got, want)
		}
	}
	if n := want.EventsFor(600 * time.Millisecond); want.At(n) > 600*time.Millisecond || want.At(n+1) <= 600*time.Millisecond {
		t.Fatalf("EventsFor is not the largest n within the bound: %d", n)
	}
}

func TestChooseOnThisMachineAndTheWriteUps(t *testing.T) {
	o := DefaultOptions()
	for _, c := range []struct {
		name string
		a    float64
	}{{"this VM", 10.6e-9}, {"write-up", 2.9e-9}, {"loaded VM", 25e-9}} {
		curve := Curve{A: c.a, B: 1.5e-6, C: 0.5e-3}
		s, err := Choose(curve, o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if lt := curve.At(s.LongEvents); lt < 2*o.SLO {
			t.Errorf("%s: long stream takes %s, want ≥ 2x the SLO", c.name, lt)
		}
		if st := curve.At(s.ShortMax); st > o.SLO/20 {
			t.Errorf("%s: short stream takes %s", c.name, st)
		}
		share := 1 / float64(s.LongEvery)
		cpu := s.Rate * (share*curve.At(s.LongEvents).Seconds() + (1-share)*curve.At((s.ShortMin+s.ShortMax)/2).Seconds())
		if cpu > o.CPUBudget+1e-9 {
			t.Errorf("%s: rate %.1f costs %.2f cores, budget %.2f", c.name, s.Rate, cpu, o.CPUBudget)
		}
		if len(s.Why) < 3 || !strings.Contains(strings.Join(s.Why, "\n"), "breaches per") {
			t.Errorf("%s: the choice must say why: %q", c.name, s.Why)
		}
		t.Logf("%s: %+v", c.name, s)
	}
}

// A busy machine inflates the fitted constant; the choice degrades to
// short ordinary streams and says so, instead of failing the lab.
func TestChooseOnABusyMachine(t *testing.T) {
	s, err := Choose(Curve{A: 20e-9, B: 20e-6, C: 30e-3}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.ShortMax != minShort || !strings.Contains(strings.Join(s.Why, "\n"), "quieter machine") {
		t.Fatalf("%+v", s)
	}
}

func TestChooseRefusesTheFixedBuild(t *testing.T) {
	_, err := Choose(Curve{A: 0, B: 0.2e-6, C: 0.5e-3}, DefaultOptions())
	if !errors.Is(err, ErrNotBaseline) {
		t.Fatalf("err = %v", err)
	}
}

func TestMeasureReportsProbeErrors(t *testing.T) {
	_, err := Measure(context.Background(), func(context.Context, int) (time.Duration, error) {
		return 0, errors.New("connection refused")
	}, []int{100}, 1)
	if err == nil || !strings.Contains(err.Error(), "warm-up") {
		t.Fatalf("err = %v", err)
	}
}
