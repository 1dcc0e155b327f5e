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

// The gateway's stream-length series (gateway/internal/proxy): a histogram
// of each stream's events n, whose sum is Σn over the streams that ended,
// and a counter of Σn².
const (
	LengthHistogram = "gateway_stream_length_events"
	LengthSquares   = "gateway_stream_length_events_squared_total"
)

// Lengths are Σn and Σn² over the streams that ended in a delta's window,
// read from the gateway's own counters just before and just after the
// delta. A growth fit needs the streams of exactly the window whose bytes
// it reads: Prometheus's increase over a 10 s window scraped every 5 s
// sees one or two scrapes, and a long stream that ended in the window was
// as often counted in the next, which flattened a quadratic function's
// fit to n^1.2 in a live run.
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

// readLengths reads Σn and Σn² so far from the gateway's /metrics, summed
// over every series of the two; ok is false when it exports neither (a
// gateway older than the pager).
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
	h, sq := families[LengthHistogram], families[LengthSquares]
	if h == nil || sq == nil {
		return l, false, nil
	}
	for _, m := range h.GetMetric() {
		l.SumN += m.GetHistogram().GetSampleSum()
	}
	for _, m := range sq.GetMetric() {
		l.SumN2 += m.GetCounter().GetValue()
	}
	return l, true, nil
}

// lengthsAround is Σn and Σn² of the streams that ended while take ran:
// the counters' growth from before to after it. nil when either read
// failed or the counters fell (the gateway restarted): the growth fit
// then asks Prometheus for that window.
func (s *Sampler) lengthsAround(ctx context.Context, take func() error) (*Lengths, error) {
	if s.counts == "" {
		return nil, take()
	}
	before, okBefore, errBefore := readLengths(ctx, s.cfg.Client, s.counts)
	if err := take(); err != nil {
		return nil, err
	}
	after, okAfter, errAfter := readLengths(ctx, s.cfg.Client, s.counts)
	if errBefore != nil || errAfter != nil {
		s.cfg.Log.Debug().AnErr("before", errBefore).AnErr("after", errAfter).Msg("the gateway's stream counts around a delta were not read")
		return nil, nil
	}
	if !okBefore || !okAfter || after.SumN < before.SumN || after.SumN2 < before.SumN2 {
		return nil, nil
	}
	return &Lengths{SumN: after.SumN - before.SumN, SumN2: after.SumN2 - before.SumN2}, nil
}
