// Package repro is the write-up's standalone reproduction: it replays the same
// synthetic long-generation streams through the baseline and the fixed
// transcript parsers and reports latency, SLO breach rate, burn rate and
// allocation per phase.
package repro

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"burnlab/gateway/internal/transcript"
	"burnlab/shared/slo"
)

// Parser turns one stream's events into its transcript.
type Parser func(events []string) string

// Phase is one named parser to replay the traffic through.
type Phase struct {
	Name  string
	Parse Parser
}

// Phases are the write-up's two phases, in its order.
var Phases = []Phase{
	{Name: "baseline", Parse: transcript.ParseStreamBaseline},
	{Name: "fixed", Parse: transcript.ParseStreamFixed},
}

// PhaseByName finds one of Phases.
func PhaseByName(name string) (Phase, error) {
	for _, p := range Phases {
		if p.Name == name {
			return p, nil
		}
	}
	return Phase{}, fmt.Errorf("unknown phase %q (want baseline or fixed)", name)
}

// Traffic is the seeded synthetic workload; the same Traffic always yields the
// same streams.
type Traffic struct {
	Streams              int
	EventsMin, EventsMax int
	// LongEvery, when set, makes the last stream of every LongEvery a long
	// generation of LongEvents events; the others keep to EventsMin to
	// EventsMax.
	LongEvery, LongEvents int
	Seed                  uint64
}

// Validate rejects traffic the parsers cannot say anything about.
func (t Traffic) Validate() error {
	switch {
	case t.Streams < 1:
		return fmt.Errorf("streams must be at least 1, got %d", t.Streams)
	case t.EventsMin < 1:
		return fmt.Errorf("events-min must be at least 1, got %d", t.EventsMin)
	case t.EventsMax < t.EventsMin:
		return fmt.Errorf("events-max (%d) is below events-min (%d)", t.EventsMax, t.EventsMin)
	case t.LongEvery < 0 || (t.LongEvery > 0 && t.LongEvents < 1):
		return fmt.Errorf("a long generation every %d streams needs at least 1 event, got %d", t.LongEvery, t.LongEvents)
	}
	return nil
}

// Payloads keep to the write-up's 24–96 characters: outside that range its
// regexp does not match and the baseline would do almost nothing.
const (
	minPayload = 24
	maxPayload = 96
)

// SynthEvents stands in for the network read: the n events of stream i.
func (t Traffic) SynthEvents(i int) []string {
	rng := rand.New(rand.NewPCG(t.Seed, uint64(i))) //nolint:gosec // G115: a stream's index is never negative
	n := t.EventsMin + rng.IntN(t.EventsMax-t.EventsMin+1)
	if t.LongEvery > 0 && i%t.LongEvery == t.LongEvery-1 {
		n = t.LongEvents
	}
	events := make([]string, n)
	var buf [6 + maxPayload]byte
	for j := range events {
		b := append(buf[:0], `data: {"i":`...)
		b = strconv.AppendInt(b, int64(j), 10)
		b = append(b, `,"tok":"`...)
		size := minPayload + rng.IntN(maxPayload-minPayload+1)
		for len(b) < 6+size-2 {
			b = append(b, byte('a'+rng.IntN(26))) //nolint:gosec // G115: a letter, a to z
		}
		b = append(b, `"}`...)
		events[j] = string(b)
	}
	return events
}

// LongTarget is how long a long generation takes in the baseline once
// calibrated: 2.5 times the threshold, the margin the lab's own calibration
// (loadgen calibrate) fits its traffic shape to, so that noise on a shared
// machine neither hides a breach nor makes one of an ordinary stream.
const LongTarget = 5 * slo.Threshold / 2

// OrdinaryFastest and OrdinarySlowest bound how long an ordinary stream
// takes in the baseline once calibrated. Events are drawn evenly between the
// two lengths, and time grows with their square, so the median stream takes
// about half the threshold, as the write-up's p50 (293 ms of 600) does, and
// the slowest three quarters of it: a quarter of the threshold is left for
// the machine's noise, so ordinary streams do not breach and the one in
// -long-every that does is the long generation.
const (
	OrdinaryFastest = 3 * slo.Threshold / 10
	OrdinarySlowest = 3 * slo.Threshold / 4
)

// maxLongEvents bounds a fitted stream: past it a parser is too fast for
// any stream to breach.
const maxLongEvents = 200_000

// Cost is a parser's fitted cost: a stream of n events takes about
// NSPerEvent2·n² nanoseconds. The baseline's cost grows with the square of
// a stream's events, since each += copies the transcript so far.
type Cost struct {
	NSPerEvent2 float64
}

// Calibrate fits p's cost on this machine in two passes. First it times
// streams of 1,000, 2,000 and 4,000 events, three times each, keeps the
// fastest of each (the least disturbed by the machine), and fits t = a·n²
// to them. That fit underestimates streams of thousands more events by a
// third here (their transcripts outgrow the caches and the collector runs
// more often), so it then times three streams of the length the first fit
// says takes half the threshold, and fits a to their median: the typical
// stream at the length ordinary streams have.
func Calibrate(ctx context.Context, p Phase, seed uint64) (Cost, error) {
	var ns []int
	var ts []time.Duration
	for _, n := range []int{1000, 2000, 4000} {
		times, err := timeStreams(ctx, p, n, seed)
		if err != nil {
			return Cost{}, err
		}
		ns, ts = append(ns, n), append(ts, times[0])
	}
	n := FitSquare(ns, ts).Events(slo.Threshold / 2)
	times, err := timeStreams(ctx, p, n, seed)
	if err != nil {
		return Cost{}, err
	}
	return FitSquare([]int{n}, times[1:2]), nil
}

// timeStreams parses three streams of n events, each made just before it
// is parsed, as Run does (a stream parsed again runs from warm caches and
// is faster than any in a phase), and returns the times, fastest first.
func timeStreams(ctx context.Context, p Phase, n int, seed uint64) ([]time.Duration, error) {
	tr := Traffic{Streams: 3, EventsMin: n, EventsMax: n, Seed: seed}
	var ts []time.Duration
	for i := range tr.Streams {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("calibration: %w", err)
		}
		events := tr.SynthEvents(i)
		start := time.Now()
		p.Parse(events)
		ts = append(ts, time.Since(start))
	}
	slices.Sort(ts)
	return ts, nil
}

// FitSquare fits t = a·n² to the points by least squares: a = Σ t·n² / Σ n⁴.
func FitSquare(ns []int, ts []time.Duration) Cost {
	var num, den float64
	for i, n := range ns {
		n2 := float64(n) * float64(n)
		num += float64(ts[i]) * n2
		den += n2 * n2
	}
	if num <= 0 || den == 0 {
		return Cost{}
	}
	return Cost{NSPerEvent2: num / den}
}

// Events is the length of a stream that takes about target: the n with
// a·n² = target, at least 1 and at most maxLongEvents (a parser too fast to
// time gets the bound).
func (c Cost) Events(target time.Duration) int {
	if c.NSPerEvent2 <= 0 {
		return maxLongEvents
	}
	n := math.Ceil(math.Sqrt(float64(target) / c.NSPerEvent2))
	return int(max(1, min(n, maxLongEvents)))
}

// Result is what one phase measured.
type Result struct {
	Name       string          `json:"name"`
	Streams    int             `json:"streams"`
	P50MS      float64         `json:"p50_ms"`
	P99MS      float64         `json:"p99_ms"`
	BreachRate float64         `json:"breach_rate"`
	BurnRate   float64         `json:"burn_rate"`
	AllocBytes uint64          `json:"alloc_bytes"`
	Durations  []time.Duration `json:"-"`
}

// Summary converts r for the comparison table.
func (r Result) Summary() slo.Summary {
	return slo.Summary{
		Name:       r.Name,
		P50:        time.Duration(r.P50MS * float64(time.Millisecond)),
		P99:        time.Duration(r.P99MS * float64(time.Millisecond)),
		BreachRate: r.BreachRate,
		BurnRate:   r.BurnRate,
		AllocBytes: r.AllocBytes,
	}
}

// ErrBudget reports that a phase stopped starting streams because its time
// budget ran out; the streams it finished are still measured.
var ErrBudget = errors.New("phase time budget spent")

// Run replays traffic through p with the given number of workers. Only the
// parse is timed: event synthesis stands in for the network and is done
// before the clock starts. When ctx ends (a budget), no new stream starts and
// Run returns what finished with an error wrapping ErrBudget.
func Run(ctx context.Context, p Phase, t Traffic, workers int) (Result, error) {
	if err := t.Validate(); err != nil {
		return Result{}, err
	}
	if workers < 1 {
		return Result{}, fmt.Errorf("workers must be at least 1, got %d", workers)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	next := make(chan int)
	durations := make([]time.Duration, t.Streams)
	done := make([]bool, t.Streams)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				events := t.SynthEvents(i)
				start := time.Now()
				p.Parse(events)
				durations[i] = time.Since(start)
				done[i] = true
			}
		})
	}
	var stopped error
feed:
	for i := range t.Streams {
		select {
		case next <- i:
		case <-ctx.Done():
			stopped = fmt.Errorf("%s after %d of %d streams: %w", p.Name, i, t.Streams, ErrBudget)
			break feed
		}
	}
	close(next)
	wg.Wait()
	runtime.ReadMemStats(&after)

	var finished []time.Duration
	for i, d := range durations {
		if done[i] {
			finished = append(finished, d)
		}
	}
	return summarize(p.Name, finished, after.TotalAlloc-before.TotalAlloc), stopped
}

func summarize(name string, ds []time.Duration, alloc uint64) Result {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	breaches := 0
	for _, d := range sorted {
		if d > slo.Threshold {
			breaches++
		}
	}
	return Result{
		Name:       name,
		Streams:    len(sorted),
		P50MS:      ms(Quantile(sorted, 0.50)),
		P99MS:      ms(Quantile(sorted, 0.99)),
		BreachRate: slo.BreachRate(breaches, len(sorted)),
		BurnRate:   slo.BurnRate(breaches, len(sorted)),
		AllocBytes: alloc,
		Durations:  ds,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Quantile is the nearest-rank q-quantile of sorted: with 100 streams the p99
// is the 99th slowest, the write-up's "one stream over 600 ms" knife-edge.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// Soak keeps workers parsing the traffic's streams, round after round, until
// ctx ends: the steady load under which the write-up took its profiles.
// It returns how many streams were parsed.
func Soak(ctx context.Context, p Phase, t Traffic, workers int) (int, error) {
	if err := t.Validate(); err != nil {
		return 0, err
	}
	if workers < 1 {
		return 0, fmt.Errorf("workers must be at least 1, got %d", workers)
	}
	var mu sync.Mutex
	next, parsed := 0, 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				i := next % t.Streams
				next++
				mu.Unlock()
				p.Parse(t.SynthEvents(i))
				mu.Lock()
				parsed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return parsed, nil
}
