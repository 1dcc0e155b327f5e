package strategies

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"burnlab/shared/scenario"
)

// labPeriod is the SLO period the scenario table's durations are written
// for: the lab's 10-hour compression of 30 days.
const labPeriod = 10 * time.Hour

// An Incident is a fault on one SLO's SLI, from a clean history: the
// share of that SLO's streams made bad over time, for Duration. A healthy
// incident has no fault, only a background of bad streams drawn at random
// (a Poisson process), for a week.
type Incident struct {
	Name, What string
	SLO        string
	Phases     []scenario.Step // the share of the SLO's streams that are bad, from each After
	Duration   time.Duration
	Healthy    bool
}

// Share is the share of bad streams at elapsed since the fault began.
func (in Incident) Share(elapsed time.Duration) float64 {
	if elapsed < 0 || elapsed >= in.Duration {
		return 0
	}
	return scenario.Scenario{Steps: in.Phases}.Share(elapsed)
}

// Background is the healthy week's bad share of each SLO's budget: a
// fifth of it, spent at random.
const Background = 0.2

// HealthyName names the healthy week.
const HealthyName = "healthy-week"

// Incidents are the scenario table's faults, with the durations the table
// states for the lab scaled to w's period (a 10-minute fault of the lab's
// 10 hours is 12 hours of 30 days), a 2-minute spike at 20x and a slow
// burn at 2x, and the healthy week (a week of 30 days, scaled the same).
func Incidents(w Windows, budgets map[string]float64) ([]Incident, error) {
	scale := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * float64(w.Period) / float64(labPeriod)).Round(time.Second)
	}
	fault := scale(10 * time.Minute)
	var out []Incident
	for _, s := range scenario.All() {
		if len(s.Burn) != 1 {
			continue // none: nothing burns
		}
		var slo string
		var burn float64
		for k, v := range s.Burn {
			slo, burn = k, v
		}
		if !slices.Contains(scenario.GatewaySLOs, slo) {
			continue // another service's SLO (the provider's): not the gateway spec's incident
		}
		b, ok := budgets[slo]
		if !ok {
			return nil, fmt.Errorf("scenario %s burns SLO %q, which the spec lacks", s.Name, slo)
		}
		in := Incident{Name: s.Name, What: s.What, SLO: slo, Duration: fault}
		if len(s.Steps) == 0 {
			in.Phases = []scenario.Step{{Share: burn * b}}
		}
		for _, st := range s.Steps {
			// The scenario's shares are of all streams; with one bad kind
			// per SLO they are that SLO's.
			in.Phases = append(in.Phases, scenario.Step{After: scale(st.After), Share: st.Share})
		}
		if last := in.Phases[len(in.Phases)-1].After; last >= fault {
			in.Duration = last + scale(150*time.Second)
		}
		out = append(out, in)
	}
	lat, ok := budgets[scenario.StreamLatency]
	if !ok {
		return nil, fmt.Errorf("the spec has no SLO %q for the spike, the slow burn and the healthy week", scenario.StreamLatency)
	}
	out = append(out,
		Incident{Name: "spike", What: "a 2-minute spike at 20x (2 minutes in any window table)", SLO: scenario.StreamLatency,
			Phases: []scenario.Step{{Share: 20 * lat}}, Duration: 2 * time.Minute},
		Incident{Name: "slow-burn", What: fmt.Sprintf("a 2x burn for a tenth of the period (%s)", dur(w.Period/10)), SLO: scenario.StreamLatency,
			Phases: []scenario.Step{{Share: 2 * lat}}, Duration: w.Period / 10},
		writeup(w, lat),
		Incident{Name: HealthyName, What: fmt.Sprintf("no fault for a week of 30 days (%s): bad streams at random, %gx on average", dur(scale7d(w)), Background),
			SLO: scenario.StreamLatency, Phases: []scenario.Step{{Share: Background * lat}}, Duration: scale7d(w), Healthy: true},
	)
	return out, nil
}

// writeupSteps is how many steps the write-up's climb takes: an hour each
// in 30 days.
const writeupSteps = 72

// writeup is the write-up's own incident: "p99 had quietly climbed from
// 180 ms to 580 ms over three days". The share of streams that breach (the
// long generations, whose O(n²) transcript crosses 600 ms as they grow)
// climbs in even steps from none to 1 %, the write-up's 10x, over three
// days of 30 (a tenth of the period), and then the fix ends it.
func writeup(w Windows, budget float64) Incident {
	days3 := w.Period / 10
	in := Incident{Name: "writeup", SLO: scenario.StreamLatency, Duration: days3,
		What: fmt.Sprintf("the write-up's three days: the share of streams that breach climbs in %d steps from none to 10x the budget over a tenth of the period (%s)", writeupSteps, dur(days3))}
	for i := range writeupSteps {
		in.Phases = append(in.Phases, scenario.Step{After: days3 * time.Duration(i) / writeupSteps, Share: 10 * budget * float64(i+1) / writeupSteps})
	}
	return in
}

func scale7d(w Windows) time.Duration {
	return time.Duration(float64(7*24*time.Hour) * float64(w.Period) / float64(30*24*time.Hour)).Round(time.Second)
}

// Traffic is a request rate, named. Random traffic draws its bad streams
// at random rather than spreading them evenly.
type Traffic struct {
	Name   string
	Rate   float64 // streams per second
	Random bool
}

// LowTraffic is random traffic at a rate written in streams per second,
// named by its streams per second, or per minute under one a second.
func LowTraffic(rate string) (Traffic, error) {
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || !(r > 0) || math.IsInf(r, 0) {
		return Traffic{}, fmt.Errorf("rate %q is not a number of streams a second above 0", rate)
	}
	name := strconv.FormatFloat(r, 'g', 3, 64) + "/s"
	if r < 1 {
		name = strconv.FormatFloat(r*60, 'g', 3, 64) + "/min"
	}
	return Traffic{Name: name, Rate: r, Random: true}, nil
}

// Classes are the cumulative stream counts of the synthetic gateway by
// what happened to them, at one scrape.
type classes struct {
	total, slow, fail503, failReset, ttftSlow float64
}

// trace is the synthetic gateway's history: its cumulative counts at each
// scrape from 0 to end.
type trace struct {
	scrape time.Duration
	at     []classes
}

// synthesize builds the history. The fault begins at start. An exact
// share is spread evenly over the streams, as the lab's upstream does (one
// in 1/share, not a coin toss), so the counts are the integral of the
// share; the healthy week's bad streams, and every bad stream of random
// traffic, are a Poisson process instead, whose clumps are what a short
// window sees at a low rate.
func synthesize(in Incident, tr Traffic, start, end, scrape time.Duration, seed uint64) trace {
	n := int(end/scrape) + 1
	t := trace{scrape: scrape, at: make([]classes, n)}
	rng := rand.New(rand.NewPCG(seed, 0))
	var c classes
	for i := 1; i < n; i++ {
		from, to := time.Duration(i-1)*scrape, time.Duration(i)*scrape
		// Whole streams arrive, evenly: at one a minute a 5-second scrape
		// sees one or none. A fraction of a stream, and a bad one drawn
		// on it, would make the le="0.6" bucket (total − slow) fall, which
		// Prometheus reads as a counter reset.
		streams := arrived(tr.Rate, to) - arrived(tr.Rate, from)
		var bad float64
		if in.Healthy || tr.Random {
			bad = min(streams, poisson(rng, streams*in.Share(from-start)))
		} else {
			bad = tr.Rate * integral(in, from-start, to-start)
		}
		c.total += streams
		switch in.SLO {
		case scenario.Availability:
			// The upstream-errors fault: every other failure answered 503,
			// the rest reset mid-stream.
			c.fail503 += bad / 2
			c.failReset += bad / 2
		case scenario.TTFT:
			c.ttftSlow += bad
		default:
			c.slow += bad
		}
		t.at[i] = c
	}
	return t
}

// arrived is how many whole streams have arrived by t at rate a second;
// the nudge keeps 1/60 × 60 from flooring to none.
func arrived(rate float64, t time.Duration) float64 {
	return math.Floor(rate*t.Seconds() + 1e-9)
}

// integral is the stream-weighted bad share from a to b (seconds of bad
// streams per stream per second), exact for the phases' steps.
func integral(in Incident, a, b time.Duration) float64 {
	const step = time.Second
	var sum float64
	for t := a; t < b; {
		next := min(b, t.Truncate(step)+step)
		sum += in.Share(t) * (next - t).Seconds()
		t = next
	}
	return sum
}

// poisson draws a Poisson count with mean m (Knuth's method for small m,
// a normal approximation above 30, where it is within a count).
func poisson(rng *rand.Rand, m float64) float64 {
	if m <= 0 {
		return 0
	}
	if m > 30 {
		return max(0, float64(int(m+rng.NormFloat64()*math.Sqrt(m)+0.5)))
	}
	l, k, p := math.Exp(-m), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return float64(k)
		}
		k++
	}
}
