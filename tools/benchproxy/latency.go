package benchproxy

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Latency is what a target adds to a stream's first event and to the gaps
// between its events, at the client, one stream at a time.
type Latency struct {
	Target  string `json:"target"`
	Streams int    `json:"streams"`
	Events  int    `json:"events_each"`
	// First is the time from sending the request to reading the first
	// whole event (the time to first token, as far as a proxy adds to it).
	FirstP50Us float64 `json:"first_event_p50_us"`
	FirstP99Us float64 `json:"first_event_p99_us"`
	// Gap is the time between two consecutive events' arrivals, of Gaps
	// measured. A delay the target adds to every event alike is in no
	// gap: the gaps show how evenly it forwards, and events that waited
	// for a CPU arrive together, with gaps of 0 between them.
	Gaps     int     `json:"gaps"`
	GapP50Us float64 `json:"gap_p50_us"`
	GapP99Us float64 `json:"gap_p99_us"`
}

// streamTimes sends n streams of events tokens, paceMS apart, through
// each target and measures each one's first event and every gap.
//
// The targets take turns: a first-event figure is a difference of tens of
// microseconds between rows, and a machine that drifts over the half
// minute a row takes moves whole rows by as much when they are measured
// one after another, so the drift must fall on every row alike, as the
// CPU rows' rounds make it. In its turn a target streams
// twice and only the second is counted: a process idle through the other
// targets' turns answers its first stream late (in one run, every proxy by
// 200–400 µs, the ReverseProxy most), and a proxy under load is not idle.
func streamTimes(ctx context.Context, c *http.Client, targets []*target, n, events, paceMS int) ([]Latency, error) {
	body := requestBody(events, paceMS)
	firsts, gaps := make([][]time.Duration, len(targets)), make([][]time.Duration, len(targets))
	// The first turn opens the connections through each chain, which the
	// others reuse, so it is not counted either.
	for i := range n + 1 {
		for k, t := range targets {
			var first time.Duration
			var streamGaps []time.Duration
			for range 2 {
				var err error
				if first, streamGaps, err = streamTime(ctx, c, t, body, events); err != nil {
					return nil, fmt.Errorf("bench-proxy: %s: a latency stream failed: %w", t.name, err)
				}
			}
			if i > 0 {
				firsts[k] = append(firsts[k], first)
				gaps[k] = append(gaps[k], streamGaps...)
			}
		}
	}
	out := make([]Latency, len(targets))
	for k, t := range targets {
		if err := t.proc.Alive(); err != nil {
			return nil, err
		}
		slices.Sort(firsts[k])
		slices.Sort(gaps[k])
		out[k] = Latency{Target: t.name, Streams: n, Events: events, Gaps: len(gaps[k]),
			FirstP50Us: us(quantile(firsts[k], 0.5)), FirstP99Us: us(quantile(firsts[k], 0.99)),
			GapP50Us: us(quantile(gaps[k], 0.5)), GapP99Us: us(quantile(gaps[k], 0.99))}
	}
	return out, nil
}

// streamTime sends one stream through t and measures its first event and
// the gaps between its events.
func streamTime(ctx context.Context, c *http.Client, t *target, body []byte, events int) (first time.Duration, gaps []time.Duration, err error) {
	t0 := time.Now()
	var seen int
	var last time.Time
	resp, err := post(ctx, c, t.url, body)
	if err != nil {
		return 0, nil, err
	}
	err = readStream(resp, EventsPerStream(events), func(total int) {
		if total == seen {
			return // a read that ended inside an event
		}
		now := time.Now()
		if seen == 0 {
			first = now.Sub(t0)
		} else {
			gaps = append(gaps, now.Sub(last))
		}
		// Events that came in the same read came together.
		for range total - seen - 1 {
			gaps = append(gaps, 0)
		}
		seen, last = total, now
	})
	return first, gaps, err
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
