package load

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"

	"burnlab/shared/slo"
)

// Recorder keeps every stream's result: HDR histograms for the report's
// percentiles and Prometheus metrics for the dashboard's client-side SLI.
type Recorder struct {
	mu         sync.Mutex
	duration   *hdrhistogram.Histogram // ok streams, microseconds
	ttft       *hdrhistogram.Histogram
	outcomes   map[string]int
	errors     map[string]int // first words of error messages, by outcome
	scheduled  int
	dropped    int
	inFlight   int
	breaches   int
	counted    int
	events     int64
	bytes      int64
	longOK     int
	longBreach int

	mDuration *prometheus.HistogramVec
	mTTFT     prometheus.Histogram
	mStreams  *prometheus.CounterVec
	mDropped  prometheus.Counter
	mInFlight prometheus.Gauge
}

// NewRecorder registers the loadgen_* metrics on reg.
func NewRecorder(reg prometheus.Registerer) *Recorder {
	r := &Recorder{
		duration: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3),
		ttft:     hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3),
		outcomes: map[string]int{},
		errors:   map[string]int{},
		mDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loadgen_stream_duration_seconds",
			Help:    "Client-side stream time, from the scheduled start to [DONE] or the end of the stream.",
			Buckets: slo.Buckets,
		}, []string{"outcome"}),
		mTTFT: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "loadgen_ttft_seconds", Help: "Client-side time to first token, from the scheduled start.", Buckets: slo.TTFTBuckets,
		}),
		mStreams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadgen_streams_total", Help: "Streams finished, by outcome.",
		}, []string{"outcome"}),
		mDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loadgen_dropped_starts_total", Help: "Scheduled starts skipped because -max-inflight streams were already running.",
		}),
		mInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "loadgen_streams_in_flight", Help: "Streams running now.",
		}),
	}
	reg.MustRegister(r.mDuration, r.mTTFT, r.mStreams, r.mDropped, r.mInFlight)
	for _, o := range Outcomes {
		r.mStreams.WithLabelValues(o)
	}
	return r
}

func (r *Recorder) started() {
	r.mu.Lock()
	r.scheduled++
	r.inFlight++
	r.mu.Unlock()
	r.mInFlight.Inc()
}

func (r *Recorder) drop() {
	r.mu.Lock()
	r.scheduled++
	r.dropped++
	r.mu.Unlock()
	r.mDropped.Inc()
}

// record adds one finished stream.
func (r *Recorder) record(res Result) {
	r.mInFlight.Dec()
	r.mStreams.WithLabelValues(res.Outcome).Inc()
	if res.Duration > 0 {
		r.mDuration.WithLabelValues(res.Outcome).Observe(res.Duration.Seconds())
	}
	if res.TTFT > 0 {
		r.mTTFT.Observe(res.TTFT.Seconds())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.outcomes[res.Outcome]++
	r.events += int64(res.Events)
	r.bytes += res.Bytes
	if res.Err != "" {
		r.errors[res.Outcome+": "+firstWords(res.Err)]++
	}
	if !Counts(res.Outcome) {
		return
	}
	r.counted++
	breach := res.Outcome != OutcomeOK || res.Duration > slo.Threshold
	if breach {
		r.breaches++
	}
	if res.Long {
		if breach {
			r.longBreach++
		} else {
			r.longOK++
		}
	}
	if res.Outcome == OutcomeOK {
		record(r.duration, res.Duration)
	}
	if res.TTFT > 0 {
		record(r.ttft, res.TTFT)
	}
}

// record adds d to h in µs, held to h's range: a stream longer than the
// histogram's ten minutes counts as ten minutes, not as nothing.
func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := min(max(1, d.Microseconds()), h.HighestTrackableValue())
	_ = h.RecordValue(us) // in range by construction: cannot fail
}

// firstWords keeps error kinds few: messages differ in their details.
func firstWords(s string) string {
	const keep = 60
	if len(s) > keep {
		return s[:keep] + "…"
	}
	return s
}

// Snapshot is the state shown on the progress line.
type Snapshot struct {
	Scheduled, Dropped, InFlight, OK, Failed, Counted, Breaches int
	P50, P99                                                    time.Duration
}

// BreachRate is the share of the streams that count toward the SLO that
// missed it.
func (s Snapshot) BreachRate() float64 { return slo.BreachRate(s.Breaches, s.Counted) }

// BurnRate is how fast those streams spend the error budget.
func (s Snapshot) BurnRate() float64 { return slo.BurnRate(s.Breaches, s.Counted) }

// Snapshot reads the counters now.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{Scheduled: r.scheduled, Dropped: r.dropped, InFlight: r.inFlight, OK: r.outcomes[OutcomeOK],
		Counted: r.counted, Breaches: r.breaches,
		P50: us(r.duration.ValueAtQuantile(50)), P99: us(r.duration.ValueAtQuantile(99))}
	for o, n := range r.outcomes {
		if o != OutcomeOK && Counts(o) {
			s.Failed += n
		}
	}
	return s
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
