// Package calibrate fits the baseline gateway's cost curve on the machine at
// hand and chooses a traffic shape from it, so that the write-up's "1 % of
// streams breach → burn 10x" holds here too: the baseline's cost is
// quadratic in a stream's events, and its constant differs several-fold
// between machines (≈2.9 ns × n² on the write-up's, 10–28 ns here).
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"burnlab/loadgen/internal/shape"
	"burnlab/shared/slo"
)

// Point is the fastest time of streams of one length.
type Point struct {
	Events int
	Time   time.Duration
}

// Curve is t(n) = A·n² + B·n + C, in seconds.
type Curve struct{ A, B, C float64 }

// At is the predicted time of an n-event stream.
func (c Curve) At(n int) time.Duration {
	x := float64(n)
	return time.Duration((c.A*x*x + c.B*x + c.C) * float64(time.Second))
}

// EventsFor is the largest n with t(n) ≤ d.
func (c Curve) EventsFor(d time.Duration) int {
	t := d.Seconds() - c.C
	if c.A <= 0 || t <= 0 {
		return 0
	}
	return int((-c.B + math.Sqrt(c.B*c.B+4*c.A*t)) / (2 * c.A))
}

// Probe times one stream of n events through the gateway.
type Probe func(ctx context.Context, events int) (time.Duration, error)

// Measure runs reps streams of each size one after another (after one
// warm-up stream) and keeps each size's fastest: on a shared machine the
// other runs measure the neighbours too, and the fastest is the closest to
// the gateway's own cost.
func Measure(ctx context.Context, probe Probe, sizes []int, reps int) ([]Point, error) {
	if _, err := probe(ctx, sizes[0]); err != nil {
		return nil, fmt.Errorf("warm-up stream: %w", err)
	}
	var pts []Point
	for _, n := range sizes {
		var ts []time.Duration
		for range reps {
			d, err := probe(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("%d-event stream: %w", n, err)
			}
			ts = append(ts, d)
		}
		pts = append(pts, Point{Events: n, Time: slices.Min(ts)})
	}
	return pts, nil
}

// MaxResidual is the largest relative RMS residual a fit may leave: past
// it the points are no quadratic cost curve (a busy machine, a gateway that
// is not the baseline), and a shape chosen from them would be noise.
const MaxResidual = 0.35

// Fit is the least-squares curve t(n) = A·n² + B·n + C through the points,
// in relative terms, with no negative coefficient: a stream cannot take negative time per
// event or in all, and an unconstrained fit of noisy points readily says so
// (−19.4 µs·n with a 21.6 ms intercept, or a −31.5 ms intercept, on a busy
// machine), which ruins every prediction off the measured range. Of the
// curves made of a subset of the three terms, it keeps the non-negative one
// closest to the points (for three terms that is the constrained optimum),
// and refuses it when it still misses them by more than MaxResidual.
func Fit(pts []Point) (Curve, error) {
	if len(pts) < 3 {
		return Curve{}, errors.New("calibrate: need at least 3 sizes to fit a curve")
	}
	best, bestRes, found := Curve{}, math.Inf(1), false
	for terms := 1; terms < 8; terms++ { // bit 0: n², bit 1: n, bit 2: 1
		if terms&1 == 0 {
			continue // without n² it is not the baseline's cost
		}
		c, ok := leastSquares(pts, terms)
		if !ok || c.A < 0 || c.B < 0 || c.C < 0 {
			continue
		}
		if r := Residual(pts, c); r < bestRes {
			best, bestRes, found = c, r, true
		}
	}
	if !found || best.A == 0 {
		return Curve{}, fmt.Errorf("%w: no curve with a positive n² term fits the measurements", ErrNotBaseline)
	}
	if r := Residual(pts, best); r > MaxResidual {
		// Said as not-the-baseline: the loadgen then runs its built-in shape
		// and calibrates again at its next start, as for the fixed build.
		return best, fmt.Errorf("%w: the best curve (%s) misses the measurements by %.0f %% RMS, over the %.0f %% a cost curve may (a machine too busy to measure, or a gateway whose cost is not quadratic)",
			ErrNotBaseline, best, 100*r, 100*MaxResidual)
	}
	return best, nil
}

// leastSquares solves the normal equations for the terms' subset (bit 0:
// n², bit 1: n, bit 2: constant), each point weighted by 1/t: a busy
// machine's noise is a share of each time, not a number of milliseconds,
// and unweighted the longest stream would drown the shortest. n is scaled
// to thousands to keep the system well conditioned.
func leastSquares(pts []Point, terms int) (Curve, bool) {
	var idx []int
	for k := range 3 {
		if terms&(1<<k) != 0 {
			idx = append(idx, k)
		}
	}
	k := len(idx)
	m := make([][]float64, k)
	for r := range m {
		m[r] = make([]float64, k+1)
	}
	for _, p := range pts {
		t := p.Time.Seconds()
		if t <= 0 {
			continue
		}
		x := float64(p.Events) / 1000
		all := [3]float64{x * x / t, x / t, 1 / t}
		for r := range k {
			for c := range k {
				m[r][c] += all[idx[r]] * all[idx[c]]
			}
			m[r][k] += all[idx[r]] // the weighted target, t/t
		}
	}
	for col := range k {
		piv := col
		for r := col + 1; r < k; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[piv][col]) {
				piv = r
			}
		}
		m[col], m[piv] = m[piv], m[col]
		if math.Abs(m[col][col]) < 1e-12 {
			return Curve{}, false
		}
		for r := range k {
			if r != col {
				f := m[r][col] / m[col][col]
				for c := col; c <= k; c++ {
					m[r][c] -= f * m[col][c]
				}
			}
		}
	}
	var coef [3]float64
	for r, t := range idx {
		coef[t] = m[r][k] / m[r][r]
	}
	return Curve{A: coef[0] / 1e6, B: coef[1] / 1e3, C: coef[2]}, true
}

// Residual is the relative RMS distance of the points from c.
func Residual(pts []Point, c Curve) float64 {
	var s float64
	for _, p := range pts {
		if t := p.Time.Seconds(); t > 0 {
			d := (c.At(p.Events).Seconds() - t) / t
			s += d * d
		}
	}
	return math.Sqrt(s / float64(len(pts)))
}

// String is the curve as the calibration prints it.
func (c Curve) String() string {
	return fmt.Sprintf("t(n) = %.3g ns·n² + %.3g µs·n + %.3g ms", c.A*1e9, c.B*1e6, c.C*1e3)
}

// Options steer the choice of shape.
type Options struct {
	SLO time.Duration
	// ShortWindow is the lab's short alert window; MinBreaches of them
	// must fall in it at a 10x burn, so the burn it measures is not noise.
	ShortWindow time.Duration
	MinBreaches int
	// CPUBudget is the share of one core the baseline gateway may spend on
	// average; past about one, streams queue and everything breaches.
	CPUBudget float64
	LongEvery int
	Seed      uint64
}

// DefaultOptions fit the lab: the stream-latency SLO, a 2-minute short page
// window.
func DefaultOptions() Options {
	return Options{SLO: slo.Threshold, ShortWindow: 2 * time.Minute, MinBreaches: 30, CPUBudget: 0.7, LongEvery: 100, Seed: 1}
}

// ErrNotBaseline means the gateway's cost is not quadratic: it is the fixed
// build, or the machine is so fast no stream of a sane length breaches.
var ErrNotBaseline = errors.New("calibrate: the gateway does not show the baseline's quadratic cost")

// Choose picks a shape from the curve:
//   - long generations take shape.LongCost (2.5) times the SLO, so they breach with a margin for
//     noise on either side;
//   - ordinary streams take at most 1/30 of it, so contention with a long
//     one never pushes them over;
//   - the rate gives MinBreaches long generations per short window, unless
//     that would spend more than CPUBudget, which would saturate the
//     gateway — then the rate is capped and the shortfall said.
func Choose(c Curve, o Options) (shape.Shape, error) {
	var why []string
	say := func(format string, args ...any) { why = append(why, fmt.Sprintf(format, args...)) }
	say("fitted baseline cost %s", c)
	if t := c.At(8000); c.A <= 0 || t < o.SLO/4 {
		return shape.Shape{}, fmt.Errorf("%w: an 8,000-event stream takes %s (is it the fixed build?)", ErrNotBaseline, t.Round(time.Millisecond))
	}
	long := roundUp(c.EventsFor(time.Duration(shape.LongCost*float64(o.SLO))), 500)
	say("long generation: %d events, predicted %s = %.1fx the %s SLO (every one breaches)", long, c.At(long).Round(time.Millisecond), c.At(long).Seconds()/o.SLO.Seconds(), o.SLO)
	shortMax := c.EventsFor(o.SLO / 30)
	if shortMax < minShort {
		say("the fit leaves ordinary streams no room under %s (a busy machine inflates its constant); using %d events — calibrate again on a quieter machine", o.SLO/30, minShort)
		shortMax = minShort
	}
	shortMin := max(1, shortMax/3)
	say("ordinary stream: %d–%d events, predicted ≤ %s (never breaches)", shortMin, shortMax, c.At(shortMax).Round(time.Millisecond))

	share := 1 / float64(o.LongEvery)
	perStream := share*c.At(long).Seconds() + (1-share)*c.At((shortMin+shortMax)/2).Seconds()
	need := float64(o.MinBreaches) / share / o.ShortWindow.Seconds()
	rate := need
	if cpu := need * perStream; cpu > o.CPUBudget {
		rate = o.CPUBudget / perStream
		say("%.1f streams/s would give %d breaches per %s window but cost %.2f cores of gateway time; capped at %.1f/s (%.0f breaches per window) to stay below saturation",
			need, o.MinBreaches, o.ShortWindow, cpu, rate, rate*share*o.ShortWindow.Seconds())
	}
	rate = math.Floor(rate*2) / 2
	if rate < 0.5 {
		return shape.Shape{}, fmt.Errorf("calibrate: the machine affords only %.2f streams/s within the CPU budget", rate)
	}
	say("rate %.1f streams/s: 1 long in %d → %.0f breaches per %s window at a 10x burn; baseline gateway busy %.2f cores on average",
		rate, o.LongEvery, rate*share*o.ShortWindow.Seconds(), o.ShortWindow, rate*perStream)
	// Stated before it is measured: every long stream breaches and no
	// ordinary one does, so the breach rate is their share.
	burn := share / slo.Budget
	say("expected baseline burn %.1fx: 1 stream in %d breaches against a %.1f %% budget (the fixed build: 0x)", burn, o.LongEvery, 100*slo.Budget)
	s := shape.Shape{Rate: rate, LongEvery: o.LongEvery, LongEvents: long, ShortMin: shortMin, ShortMax: shortMax, Seed: o.Seed, Why: why}
	return s, s.Validate()
}

// minShort is the shortest ordinary stream the lab sends: a chat answer of
// a few sentences.
const minShort = 100

func roundUp(n, step int) int { return (n + step - 1) / step * step }
