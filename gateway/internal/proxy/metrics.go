package proxy

import (
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"burnlab/gateway/internal/redact"
	"burnlab/shared/slo"
)

// Outcomes of a stream, the only values of the `outcome` label.
const (
	OutcomeOK             = "ok"
	OutcomeUpstreamError  = "upstream_error"
	OutcomeClientCanceled = "client_canceled"
	OutcomeRejected       = "rejected"
)

// Values of the traffic label on the stream histograms: a probe tenant's
// streams (tenant.Tenant.Probe: synthetic, such as the loadgen's
// calibration) or everyone else's. The SLIs count traffic!="probe", so a
// stream is a customer's unless its tenant is declared a probe.
const (
	TrafficUser  = "user"
	TrafficProbe = "probe"
)

// Values of gateway_quota_rejections_total's limit label.
const (
	limitTokens  = "tokens_per_minute" //nolint:gosec // G101 reads "tokens" as a secret; this is a label value
	limitStreams = "streams"
)

// Metrics are the gateway's Prometheus series. Their names are a contract
// with the SLO rules and the dashboard.
type Metrics struct {
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	events      prometheus.Counter
	lengths     prometheus.Histogram
	places      prometheus.Counter
	tokens      *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	redactions  *prometheus.CounterVec
	upstreamErr *prometheus.CounterVec
	inFlight    prometheus.Gauge
}

// NewMetrics registers the gateway's metrics on reg, with every tenant's,
// every redaction kind's and every route's and outcome's series created at
// zero so rates start from a point.
func NewMetrics(reg prometheus.Registerer, variant, version string, tenants []string) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_stream_duration_seconds",
			Help:    "Wall-clock time from a request being accepted to the last byte of its stream forwarded.",
			Buckets: slo.Buckets,
		}, []string{"route", "outcome", "traffic"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_stream_ttft_seconds",
			Help:    "Time from a request being accepted to its first token forwarded.",
			Buckets: slo.TTFTBuckets,
		}, []string{"route", "traffic"}),
		// The events and their places let the pager fit how a function's
		// bytes per stream grow with the stream's length n from production
		// data (heapdelta.FitGrowth). Both count as the stream goes, each
		// time it waits on the upstream, not when it ends: a function
		// allocates as the events arrive, and a long stream's bytes fall
		// in the delta profile's window they were allocated in, so its
		// events must too. Counted at the end (as the squares of lengths
		// this counter replaces were), a stream that began before a window
		// put all its length in the window and only part of its bytes,
		// which scattered a live fit's points by up to 27 %. The new name
		// keeps a pager and a gateway of different ages from reading one
		// meaning as the other: each finds no series, and says so.
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_stream_events_total",
			Help: "SSE data events forwarded to clients, counted as they are forwarded.",
		}),
		lengths: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gateway_stream_length_events",
			Help:    "SSE data events a stream forwarded, observed once it ended, every stream alike (the heap profiles count every stream's bytes).",
			Buckets: prometheus.ExponentialBuckets(64, 2, 11), // 64 … 65,536
		}),
		places: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_stream_event_places_total",
			Help: "The sum over forwarded events of 2i-1, i being the event's place in its stream (1 for the first), counted as they are forwarded: a stream of n events has added n² when it ends.",
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_tokens_total",
			Help: "Tokens forwarded, by tenant (one per chunk with non-empty delta content).",
		}, []string{"tenant"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_quota_rejections_total",
			Help: "Requests refused with 429 by the tenant's limits: limit=tokens_per_minute (quota spent) or streams (too many in flight).",
		}, []string{"tenant", "limit"}),
		redactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_redactions_total",
			Help: "PII redacted from streams, by kind.",
		}, []string{"kind"}),
		upstreamErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_upstream_errors_total",
			Help: "Problems with the upstream's answer, by reason; some end the stream, some are repaired and counted.",
		}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_streams_in_flight",
			Help: "Streams being served now.",
		}),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gateway_build_info",
		Help: "Always 1; the variant (baseline or fixed transcript parser) and version this binary was built with.",
	}, []string{"variant", "version"})
	buildInfo.WithLabelValues(variant, version).Set(1)
	reg.MustRegister(m.duration, m.ttft, m.events, m.lengths, m.places, m.tokens, m.rejections, m.redactions, m.upstreamErr, m.inFlight, buildInfo)
	for _, t := range tenants {
		m.tokens.WithLabelValues(t)
		for _, l := range []string{limitTokens, limitStreams} {
			m.rejections.WithLabelValues(t, l)
		}
	}
	for k := range redact.NumKinds {
		m.redactions.WithLabelValues(k.String())
	}
	for _, r := range allReasons {
		m.upstreamErr.WithLabelValues(r)
	}
	// The SLIs' series exist from the start, so an idle gateway reads as
	// no traffic (a rate of 0) and only a scrape that stopped reads as no
	// data: the SLI no-data alert tells the two apart by this.
	for _, route := range []string{RouteStream, RouteCompletions} {
		for _, traffic := range []string{TrafficUser, TrafficProbe} {
			m.ttft.WithLabelValues(route, traffic)
			for _, o := range []string{OutcomeOK, OutcomeUpstreamError, OutcomeClientCanceled, OutcomeRejected} {
				m.duration.WithLabelValues(route, o, traffic)
			}
		}
	}
	return m
}

// observeStream records a stream's duration with an exemplar naming the
// stream: its request ID, the request_id of its "stream" log line, and its
// tenant ("" when it was refused before its key was read). The histogram
// exposes the latest exemplar of each bucket and Prometheus stores each one
// it scrapes, so the slow buckets point at streams whose log lines say why
// they were slow. The exemplar costs a few small allocations once a
// stream, never once an event.
func (m *Metrics) observeStream(route, outcome, traffic string, seconds float64, id, tenant string) {
	obs := m.duration.WithLabelValues(route, outcome, traffic)
	labels := streamExemplar(id, tenant)
	if eo, ok := obs.(prometheus.ExemplarObserver); ok && labels != nil {
		eo.ObserveWithExemplar(seconds, labels)
		return
	}
	obs.Observe(seconds)
}

// streamExemplar returns the exemplar labels for a stream, or nil when
// even its request ID alone cannot be one. ObserveWithExemplar panics on
// labels over prometheus.ExemplarMaxRunes in all or not valid UTF-8, and
// the gateway must not crash on an odd tenant name: the tenant is dropped
// first, since the request ID is what finds the log line.
func streamExemplar(id, tenant string) prometheus.Labels {
	const idLabel, tenantLabel = "request_id", "tenant"
	if id == "" || !utf8.ValidString(id) {
		return nil
	}
	runes := len(idLabel) + utf8.RuneCountInString(id)
	if runes > prometheus.ExemplarMaxRunes {
		return nil
	}
	if tenant == "" || !utf8.ValidString(tenant) || runes+len(tenantLabel)+utf8.RuneCountInString(tenant) > prometheus.ExemplarMaxRunes {
		return prometheus.Labels{idLabel: id}
	}
	return prometheus.Labels{idLabel: id, tenantLabel: tenant}
}
