package proxy

import (
	"time"

	"github.com/rs/zerolog"

	"burnlab/gateway/internal/redact"
	"burnlab/gateway/internal/tenant"
)

// accounting is what a stream counts as it goes: events forwarded, tokens
// (covered by its tenant reservation, hold, as they stream), the first
// token's time, and the upstream's faults it repaired.
type accounting struct {
	start          time.Time
	tenant         *tenant.Tenant
	hold           *tenant.Reservation
	events, tokens int
	// published is how many of events the gateway's counters hold.
	published int
	ttft      time.Duration
	repaired  map[string]int
}

// token counts one non-empty text forwarded.
func (a *accounting) token() {
	a.tokens++
	if a.ttft == 0 {
		a.ttft = time.Since(a.start)
	}
}

func (a *accounting) repair(reason string) { a.repairs(reason, 1) }

func (a *accounting) repairs(reason string, n int) {
	if a.repaired == nil {
		a.repaired = map[string]int{}
	}
	a.repaired[reason] += n
}

// ignored counts the fields of the upstream's that the decoder ignored,
// as a client ignores them (sse.Decoder.Ignored).
func (a *accounting) ignored(n int) {
	if n > 0 {
		a.repairs(reasonMalformed, n)
	}
}

// settle makes the stream's reservation cover the tokens it has forwarded,
// drawing on its tenant's balance past what the request reserved (an
// upstream that ignores max_tokens, or a stream longer than the default
// reservation), and reports whether it could. False means the tenant's
// quota is spent: the stream must forward nothing more. Within the
// reservation it is a comparison, cheap enough for every event. The
// reservation is ended — what was not streamed given back — when the
// stream ends (admitted.release); settling after that does nothing.
func (a *accounting) settle() bool {
	return a.hold == nil || a.hold.Cover(a.tokens)
}

// publish adds the events forwarded since the last publish to the
// gateway's counters of events and of their places: the i-th event adds
// 2i-1, so the events from p+1 to n add n²-p². It is called before each
// wait on the upstream and at the end, so the counters follow the stream
// within a read, as its allocations do, at the cost of two atomic adds a
// read (a paced token stream has about one event a read; a burst, many).
func (a *accounting) publish(m *Metrics) {
	if a.events == a.published {
		return
	}
	n, p := a.events, a.published
	m.events.Add(float64(n - p))
	m.places.Add(float64((n - p) * (n + p)))
	a.published = a.events
}

// record ends a stream: its quota settled, its metrics, and its one log
// line. Content is never logged, only counts. The duration's exemplar and
// the log line carry the same request_id and tenant, so a slow stream
// found on a graph leads to its log line.
func (h *Handler) record(s *stream, res result) {
	a := &s.acct
	a.settle()
	m := h.cfg.Metrics
	elapsed := time.Since(a.start)
	tenantName, traffic := "", TrafficUser
	if a.tenant != nil {
		tenantName = a.tenant.Name
		if a.tenant.Probe {
			traffic = TrafficProbe
		}
		m.tokens.WithLabelValues(tenantName).Add(float64(a.tokens))
	}
	m.observeStream(s.route, res.outcome, traffic, elapsed.Seconds(), s.id, tenantName)
	a.publish(m)
	m.lengths.Observe(float64(a.events))
	counts := s.redactions()
	redactions := 0
	for k, n := range counts {
		if n > 0 {
			m.redactions.WithLabelValues(redact.Kind(k).String()).Add(float64(n))
			redactions += n
		}
	}
	if res.reason != "" {
		m.upstreamErr.WithLabelValues(res.reason).Inc()
	}
	for reason, n := range a.repaired {
		m.upstreamErr.WithLabelValues(reason).Add(float64(n))
	}
	level := zerolog.InfoLevel
	if res.outcome == OutcomeUpstreamError {
		level = zerolog.WarnLevel
	}
	ev := h.cfg.Log.WithLevel(level).
		Str("request_id", s.id).
		Str("route", s.route).
		Int("status", res.status).
		Str("outcome", res.outcome).
		Int("events", a.events).
		Int("tokens", a.tokens).
		Int("redactions", redactions).
		Float64("duration_ms", float64(elapsed.Microseconds())/1000).
		Str("variant", h.cfg.Variant)
	if tenantName != "" {
		ev = ev.Str("tenant", tenantName)
	}
	if a.ttft > 0 {
		m.ttft.WithLabelValues(s.route, traffic).Observe(a.ttft.Seconds())
		ev = ev.Float64("ttft_ms", float64(a.ttft.Microseconds())/1000)
	}
	if s.tr != nil {
		ev = ev.Int("transcript_bytes", s.tr.Len())
	}
	if s.truncated {
		ev = ev.Bool("transcript_truncated", true)
	}
	if res.reason != "" {
		ev = ev.Str("reason", res.reason)
	}
	if len(a.repaired) > 0 {
		ev = ev.Interface("repaired", a.repaired)
	}
	if res.err != "" {
		ev = ev.Str("error", res.err)
	}
	ev.Msg("stream")
	if s.tr != nil {
		s.tr.Release()
	}
}
