package heapdelta

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The gateway's counters the growth fit reads (gateway/internal/proxy):
// the events it forwarded, and their places, to which a stream's i-th
// event adds 2i-1 (so a stream of n events adds n²). Both count as the
// streams go, within a read of the upstream.
const (
	EventsCounter = "gateway_stream_events_total"
	EventPlaces   = "gateway_stream_event_places_total"
)

// Lengths are what the gateway forwarded in a delta's window, read from
// its own counters just before and just after the delta: SumN the events,
// SumN2 their weight by place, Σ(2i-1), which over whole streams is Σn².
// A function that allocates in proportion to an event's place (the
// baseline's `out +=` copies the i events so far) allocates in
// proportion to SumN2, one that allocates the same for every event in
// proportion to SumN, whichever streams the window cuts through.
// Prometheus's increase cannot stand in: over a 10 s window scraped
// every 5 s it sees one or two scrapes, and flattened a quadratic
// function's fit to n^1.2 in a live run. Nor can counts taken when a
// stream ends: a long stream that began before a window put all its
// length in it and only part of its bytes.
type Lengths struct{ SumN, SumN2 float64 }

// The bounds of a /metrics read: a gateway's is some tens of KB, served in
// milliseconds; one that hangs must not hold the delta back for long.
const (
	maxMetricsBytes = 4 << 20
	countsTimeout   = 2 * time.Second
)

// CountsURL is the /metrics of the process a delta URL profiles: the same
// admin listener serves both; "" when deltaURL is no URL.
func CountsURL(deltaURL string) string {
	u, err := url.Parse(deltaURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}).String()
}

// readLengths reads the two counters so far from the gateway's /metrics,
// summed over every series of each; ok is false when it lacks either.
func readLengths(ctx context.Context, client *http.Client, u string) (l Lengths, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, countsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return l, false, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return l, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return l, false, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return l, false, fmt.Errorf("reading %s: %w", u, err)
	}
	ev, sq := families[EventsCounter], families[EventPlaces]
	if ev == nil || sq == nil {
		return l, false, nil
	}
	for _, m := range ev.GetMetric() {
		l.SumN += m.GetCounter().GetValue()
	}
	for _, m := range sq.GetMetric() {
		l.SumN2 += m.GetCounter().GetValue()
	}
	return l, true, nil
}

// lengthsAround is what the gateway forwarded while take ran: the
// counters' growth from before to after it. nil when either read failed
// or the counters fell (the gateway restarted): the growth fit then
// leaves that window out.
func (s *Sampler) lengthsAround(ctx context.Context, counts string, take func() error) (*Lengths, error) {
	if counts == "" {
		return nil, take()
	}
	before, okBefore, errBefore := readLengths(ctx, s.cfg.Client, counts)
	if err := take(); err != nil {
		return nil, err
	}
	after, okAfter, errAfter := readLengths(ctx, s.cfg.Client, counts)
	if errBefore != nil || errAfter != nil {
		s.cfg.Log.Debug().AnErr("before", errBefore).AnErr("after", errAfter).Msg("the gateway's stream counts around a delta were not read")
		return nil, nil
	}
	if !okBefore || !okAfter || after.SumN < before.SumN || after.SumN2 < before.SumN2 {
		return nil, nil
	}
	return &Lengths{SumN: after.SumN - before.SumN, SumN2: after.SumN2 - before.SumN2}, nil
}
