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

// streamTimes sends n streams of events tokens, paceMS apart, one after
// another through url and measures each one's first event and every gap.
func streamTimes(ctx context.Context, c *http.Client, t *target, n, events, paceMS int) (Latency, error) {
	l := Latency{Target: t.name, Streams: n, Events: events}
	body := requestBody(events, paceMS)
	var firsts, gaps []time.Duration
	// The first stream opens the connections through the chain, which
	// the others reuse, so it is not counted.
	for i := range n + 1 {
		t0 := time.Now()
		var seen int
		var last time.Time
		var first time.Duration
		var streamGaps []time.Duration
		resp, err := post(ctx, c, t.url, body)
		if err == nil {
			err = readStream(resp, EventsPerStream(events), func(total int) {
				if total == seen {
					return // a read that ended inside an event
				}
				now := time.Now()
				if seen == 0 {
					first = now.Sub(t0)
				} else {
					streamGaps = append(streamGaps, now.Sub(last))
				}
				// Events that came in the same read came together.
				for range total - seen - 1 {
					streamGaps = append(streamGaps, 0)
				}
				seen, last = total, now
			})
		}
		if err != nil {
			return l, fmt.Errorf("bench-proxy: %s: a latency stream failed: %w", t.name, err)
		}
		if i > 0 {
			firsts = append(firsts, first)
			gaps = append(gaps, streamGaps...)
		}
	}
	slices.Sort(firsts)
	slices.Sort(gaps)
	l.FirstP50Us, l.FirstP99Us = us(quantile(firsts, 0.5)), us(quantile(firsts, 0.99))
	l.Gaps = len(gaps)
	l.GapP50Us, l.GapP99Us = us(quantile(gaps, 0.5)), us(quantile(gaps, 0.99))
	return l, t.proc.Alive()
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
