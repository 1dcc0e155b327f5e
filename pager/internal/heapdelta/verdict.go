package heapdelta

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"burnlab/shared/pproftop"
)

// Slack is how long after the alert fired a delta may end and still count
// as taken during the burn. Alertmanager delivers a page some seconds after
// the alert starts firing, and the burn that fired it is still going on:
// one DefaultEvery of slack lets the delta that was open when the alert
// fired, or the next one, stand for the burn.
const Slack = 30 * time.Second

// Pick chooses the pair of deltas to compare for a burn. The burn window
// is [burnStart, fired]: from when the burn began (the start of the
// alert's long window, say) to when the alert fired.
//
// during is the newest sample whose window lies inside the burn window
// (From >= burnStart and To <= fired+Slack); if there is none, it is the
// newest sample ending by fired+Slack that overlaps the burn window, which
// is partly from before the burn but the best the pager has. before is the
// newest sample that ended by burnStart (To <= burnStart). ok is false
// when either is missing, and reason then says why, in words.
func Pick(samples []Sample, burnStart, fired time.Time) (before, during Sample, reason string, ok bool) {
	if fired.Before(burnStart) {
		return Sample{}, Sample{}, fmt.Sprintf("the burn window is empty: it starts at %s, after the alert fired at %s", clockTime(burnStart), clockTime(fired)), false
	}
	if len(samples) == 0 {
		return Sample{}, Sample{}, "the pager holds no delta profiles: none has been taken yet, or every fetch failed (see pager_delta_profiles_total)", false
	}
	end := fired.Add(Slack)
	var prior, inside, overlapping, byEnd *Sample
	oldest := &samples[0]
	for i := range samples {
		s := &samples[i]
		if s.To.Before(oldest.To) {
			oldest = s
		}
		if s.To.After(end) {
			continue
		}
		byEnd = newer(byEnd, s)
		switch {
		case !s.To.After(burnStart):
			prior = newer(prior, s)
		case !s.From.Before(burnStart):
			inside = newer(inside, s)
		default:
			overlapping = newer(overlapping, s)
		}
	}
	var reasons []string
	if prior == nil {
		where := "inside the burn window"
		switch {
		case oldest.To.After(end):
			where = fmt.Sprintf("after the burn window (it ended at %s, when the alert fired, plus %s of slack)", clockTime(end), Slack)
		case oldest.From.Before(burnStart):
			where = "across the burn's start"
		}
		reasons = append(reasons, fmt.Sprintf("no delta profile from before the burn (it began at %s): the oldest the pager holds was taken at %s, %s",
			clockTime(burnStart), clockTime(oldest.To), where))
	}
	switch {
	case inside != nil, overlapping != nil:
	case byEnd == nil:
		reasons = append(reasons, fmt.Sprintf("no delta profile from during the burn (%s to %s): every one the pager holds was taken after %s, when the alert fired, plus %s of slack",
			clockTime(burnStart), clockTime(fired), clockTime(end), Slack))
	default:
		reasons = append(reasons, fmt.Sprintf("no delta profile from during the burn (%s to %s): the newest the pager holds by then was taken at %s, before the burn; deltas failed or the pager was not running",
			clockTime(burnStart), clockTime(fired), clockTime(byEnd.To)))
	}
	if len(reasons) > 0 {
		return Sample{}, Sample{}, strings.Join(reasons, "; "), false
	}
	return *prior, *cmp.Or(inside, overlapping), "", true
}

// newer returns the one of a (which may be nil) and b that ended later.
func newer(a, b *Sample) *Sample {
	if a == nil || b.To.After(a.To) {
		return b
	}
	return a
}

// clockTime is t as a person reads it on a page.
func clockTime(t time.Time) string { return t.UTC().Format("15:04:05 UTC") }

// The thresholds of Compare.
const (
	// DefaultThreshold is the growth that counts as a change: 50 %. The
	// gateway's traffic moves by some tens of percent from one 10 s window
	// to the next (request mix, stream lengths, an upstream's slow tail),
	// and every function's allocation moves with it; a regression that
	// burns an error budget changes its function's allocation several
	// times over (the lab's (*Baseline).Append goes from nothing to
	// nearly all of it). 50 % is well above the first and far below the
	// second.
	DefaultThreshold = 0.5
	// MinShare is the smallest share of the during profile a function
	// must make to be named: 5 %. A function below it is a few of the
	// runtime's samples, whose count can double by chance, and would not
	// explain a change in the heap anyway.
	MinShare = 0.05
	// Sigmas is how far beyond sampling noise a growth must be, in
	// standard errors. The runtime samples one allocation per Period
	// bytes (512 KiB) on average, so a function's bytes are Period times
	// a Poisson count: n samples are off by about √n. On a quiet gateway
	// a function making 5 % of a delta can be one or two samples, and
	// 0 → 1 sample is not a 50 % growth anyone should act on. At 3
	// standard errors chance passes about one function in 700, and at
	// most 20 functions can make 5 % each.
	Sigmas = 3
)

// defaultPeriod is the runtime's default sampling period (MemProfileRate),
// used for a profile that does not state its own.
const defaultPeriod = 512 << 10

// Verdict is what Compare found.
type Verdict struct {
	// Changed is whether a function's allocation grew beyond Threshold.
	Changed bool
	// Function is the top grower when Changed, e.g.
	// "burnlab/gateway/internal/transcript.(*Baseline).Append"; Before and
	// During are its flat alloc_space rates (bytes per second) in each
	// sample. All three are zero when nothing changed.
	Function       string
	Before, During float64
	// TotalBefore and TotalDuring are the whole profiles' rates, bytes per
	// second: when they grew by about the factor Function did, the change
	// is more traffic rather than one function.
	TotalBefore, TotalDuring float64
	// Threshold is the growth fraction that counts as a change (0.5 =
	// 50 %).
	Threshold float64
	// Words is the verdict in one sentence for a person.
	Words string
}

// Compare says whether the gateway's heap changed between a delta taken
// before the burn and one taken during it, and if so which function
// changed it.
//
// It compares rates, not bytes: each function's flat alloc_space (the
// bytes allocated in the function itself, not in what it calls, as
// pprof -top counts them) divided by its sample's window, so deltas of
// different lengths compare. A function is a candidate when
//
//   - it makes at least MinShare (5 %) of the during profile's bytes;
//   - its during rate exceeds its before rate by more than threshold
//     (during > before × (1 + threshold)), a function absent before
//     counting as 0;
//   - the increase is more than Sigmas (3) standard errors of sampling
//     noise (see Sigmas).
//
// The top grower is the candidate whose rate grew the most in bytes per
// second, and the heap changed when there is one. Among the functions
// above MinShare only those that grew beyond threshold compete, so that
// "nothing changed" is true of every one of them: a function that grew
// 40 % by many MB/s does not hide one that tripled.
//
// An idle gateway before the burn (total near 0) is handled like any
// other: every function grew from about nothing, and the largest during
// the burn is named. When the whole traffic grows, every function by the
// same factor, the heap did change and the top grower is the largest
// function; the sentence then names it, and TotalBefore and TotalDuring,
// grown by the same factor, tell more traffic from one function's fault.
//
// threshold is a fraction (DefaultThreshold = 0.5); a profile that cannot
// be read, or lacks alloc_space, is an error.
func Compare(before, during Sample, threshold float64) (Verdict, error) {
	if !(threshold > 0) || math.IsInf(threshold, 1) {
		return Verdict{}, fmt.Errorf("heapdelta: threshold %v: want a growth fraction above 0, such as %v", threshold, DefaultThreshold)
	}
	b, err := readRates(before)
	if err != nil {
		return Verdict{}, fmt.Errorf("heapdelta: the delta from before the burn: %w", err)
	}
	d, err := readRates(during)
	if err != nil {
		return Verdict{}, fmt.Errorf("heapdelta: the delta from during the burn: %w", err)
	}
	v := Verdict{TotalBefore: b.total, TotalDuring: d.total, Threshold: threshold}
	var top string
	for name, rate := range d.flat {
		was := b.flat[name]
		if d.total <= 0 || rate < MinShare*d.total || rate <= was*(1+threshold) || rate-was <= Sigmas*math.Sqrt(d.variance(rate)+b.variance(was)) {
			continue
		}
		if top == "" || cmp.Or(cmp.Compare(rate-was, d.flat[top]-b.flat[top]), cmp.Compare(top, name)) > 0 {
			top = name
		}
	}
	pct := strings.TrimSuffix(fmt.Sprintf("%.1f", 100*threshold), ".0")
	if top == "" {
		v.Words = fmt.Sprintf("no function's allocation grew by more than %s %% beyond sampling noise (of those making at least %.0f %% of it): the profiled process's heap did not change; look at what it calls, or at its machine",
			pct, 100*MinShare)
		return v, nil
	}
	v.Changed, v.Function, v.Before, v.During = true, top, b.flat[top], d.flat[top]
	v.Words = fmt.Sprintf("%s grew from %s/s to %s/s (%.0f%% of the allocation during the burn)",
		shortName(top), decimalBytes(v.Before), decimalBytes(v.During), 100*v.During/d.total)
	return v, nil
}

// rates is one delta's flat alloc_space rates by function, and its total,
// in bytes per second.
type rates struct {
	flat    map[string]float64
	total   float64
	seconds float64
	period  float64 // bytes per sample of the runtime's sampling
}

// variance is the sampling variance of a rate r of the delta: its bytes
// are period × a Poisson count n, so their variance is period × bytes.
// One sample is added, so that a function seen in no sample (or one)
// still counts as uncertain.
func (r rates) variance(rate float64) float64 {
	return r.period * (rate*r.seconds + r.period) / (r.seconds * r.seconds)
}

func readRates(s Sample) (rates, error) {
	seconds := s.To.Sub(s.From).Seconds()
	if seconds <= 0 {
		return rates{}, fmt.Errorf("its window %s to %s is empty", s.From.Format(time.RFC3339), s.To.Format(time.RFC3339))
	}
	if len(s.Raw) == 0 {
		return rates{}, errors.New("its profile is empty")
	}
	_, p, err := pproftop.Read(bytes.NewReader(s.Raw), pproftop.MaxBytes)
	if err != nil {
		return rates{}, err
	}
	top, total, err := pproftop.Top(p, "alloc_space", math.MaxInt)
	if err != nil {
		return rates{}, err
	}
	r := rates{flat: make(map[string]float64, len(top)), total: float64(total) / seconds, seconds: seconds, period: defaultPeriod}
	if p.PeriodType != nil && p.PeriodType.Type == "space" && p.Period > 0 {
		r.period = float64(p.Period)
	}
	for _, e := range top {
		r.flat[e.Function] = float64(e.Flat) / seconds
	}
	return r, nil
}

// shortName is a function's name from its package's last path element on:
// "burnlab/gateway/internal/transcript.(*Baseline).Append" is
// "transcript.(*Baseline).Append". A generic instance's type arguments
// may hold slashes of their own, so only the name before "[" is searched.
func shortName(fn string) string {
	head, _, _ := strings.Cut(fn, "[")
	if i := strings.LastIndexByte(head, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// decimalBytes is n bytes in decimal units, as "1.2 MB".
func decimalBytes(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	// Past 999.5 B (999.95 of a larger unit) the figure would round to
	// 1000 of its unit: the next is used instead.
	i := 0
	for i < len(units)-1 {
		limit := 999.95
		if i == 0 {
			limit = 999.5
		}
		if math.Abs(n) < limit {
			break
		}
		n /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
