// Package provider is burnlab's synthetic model provider: an
// OpenAI-compatible chat-completions endpoint that streams seeded,
// deterministic token streams of a length the caller asks for (max_tokens),
// with occasional PII and optional injected faults.
package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/loadgen/tokens"
	"burnlab/shared/openai"
	"burnlab/shared/scenario"
	"burnlab/shared/slo"
)

// Faults are injected with these probabilities per stream; all zero by
// default.
type Faults struct {
	Reset         float64       // the connection is reset mid-stream
	Malformed     float64       // one malformed line is sent mid-stream
	Status5xx     float64       // 503 instead of a stream
	SlowFirstByte float64       // the response starts after SlowDelay
	SlowDelay     time.Duration // how slow a slow first byte is
}

// Config shapes what the provider streams.
type Config struct {
	// When a request gives no max_tokens, its length is drawn from
	// [ShortMin, ShortMax], or with probability LongShare from
	// [LongMin, LongMax] (the write-up's long generations).
	ShortMin, ShortMax int
	LongMin, LongMax   int
	LongShare          float64
	// MaxTokens caps any request (default 100,000).
	MaxTokens int
	Seed      uint64
	// FirstTokenDelay and InterEvent pace a stream; zero streams as fast as
	// the connection takes, so the gateway's own cost dominates.
	FirstTokenDelay, InterEvent time.Duration
	// PIIEvery puts one PII item in about every PIIEvery tokens (0: none).
	PIIEvery int
	Faults   Faults
}

// DefaultConfig is an ordinary chat mix with 1 % long generations.
func DefaultConfig() Config {
	return Config{ShortMin: 100, ShortMax: 600, LongMin: 8000, LongMax: 12000, LongShare: 0.01,
		MaxTokens: 100000, Seed: 1, PIIEvery: 400}
}

// Validate rejects configurations that cannot produce a stream.
func (c Config) Validate() error {
	switch {
	case c.ShortMin < 1 || c.ShortMax < c.ShortMin:
		return fmt.Errorf("short streams: need 1 ≤ min ≤ max, got %d–%d", c.ShortMin, c.ShortMax)
	case c.LongMin < 1 || c.LongMax < c.LongMin:
		return fmt.Errorf("long streams: need 1 ≤ min ≤ max, got %d–%d", c.LongMin, c.LongMax)
	case c.MaxTokens < 1:
		return fmt.Errorf("max tokens must be positive, got %d", c.MaxTokens)
	case c.PIIEvery < 0:
		return fmt.Errorf("pii-every must be ≥ 0, got %d", c.PIIEvery)
	}
	for name, p := range map[string]float64{"long share": c.LongShare, "reset": c.Faults.Reset, "malformed": c.Faults.Malformed,
		"5xx": c.Faults.Status5xx, "slow first byte": c.Faults.SlowFirstByte} {
		if p < 0 || p > 1 {
			return fmt.Errorf("%s must be a probability in [0, 1], got %v", name, p)
		}
	}
	return nil
}

// Provider serves POST /v1/chat/completions.
type Provider struct {
	cfg      Config
	log      zerolog.Logger
	requests atomic.Uint64
	// Scenarios is the lab's fault on top of Faults, set at run time.
	Scenarios *Scenarios

	requestsTotal *prometheus.CounterVec
	events        prometheus.Counter
	faults        *prometheus.CounterVec
	inFlight      prometheus.Gauge
	// completions is the provider's own SLI (shared/slo's
	// CompletionThreshold): how long each non-streaming answer took.
	completions prometheus.Histogram
}

// New returns a Provider registering its upstream_* metrics on reg.
func New(cfg Config, reg prometheus.Registerer, log zerolog.Logger) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{
		cfg: cfg,
		log: log,
		requestsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "upstream_requests_total", Help: "Chat completion requests answered, by HTTP status code.",
		}, []string{"code"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "upstream_events_total", Help: "SSE data events sent.",
		}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "upstream_faults_total", Help: "Faults injected, by kind.",
		}, []string{"kind"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "upstream_streams_in_flight", Help: "Streams being sent now.",
		}),
		completions: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "upstream_completion_duration_seconds",
			Help:    "Time to answer one non-streaming chat completion, from the request's arrival to the answer written.",
			Buckets: slo.CompletionBuckets,
		}),
	}
	reg.MustRegister(p.requestsTotal, p.events, p.faults, p.inFlight, p.completions)
	p.Scenarios = newScenarios(reg, time.Now)
	for _, k := range []string{"reset", "malformed", "5xx", "slow_first_byte", "hold_end"} {
		p.faults.WithLabelValues(k)
	}
	return p, nil
}

type chatRequest struct {
	Stream    bool            `json:"stream"`
	MaxTokens *int            `json:"max_tokens"`
	Model     string          `json:"model"`
	Messages  json.RawMessage `json:"messages"`
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	if r.URL.Path != "/v1/chat/completions" {
		p.fail(w, http.StatusNotFound, "invalid_request_error", "no route "+r.URL.Path+"; use POST /v1/chat/completions")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		p.fail(w, http.StatusMethodNotAllowed, "invalid_request_error", "use POST")
		return
	}
	var req chatRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		p.fail(w, http.StatusBadRequest, "invalid_request_error", "request body is not a JSON chat request: "+err.Error())
		return
	}
	n := uint64(p.requests.Add(1))
	rng := rand.New(rand.NewPCG(p.cfg.Seed, n))
	length, err := p.length(rng, req.MaxTokens)
	if err != nil {
		p.fail(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	id := "c" + strconv.FormatUint(n%(36*36*36), 36)
	if !req.Stream {
		// The lab's faults are the gateway's streams' (each scenario's
		// share counts streams), so a direct client's answer meets only the
		// provider's own code: the provider-regression scenario's.
		p.complete(r.Context(), w, rng, id, length)
		p.completions.Observe(time.Since(arrived).Seconds())
		return
	}
	f := p.cfg.Faults
	sc, hit := p.Scenarios.hit(length)
	var inject injected
	slow, delay := f.SlowFirstByte > 0 && rng.Float64() < f.SlowFirstByte, f.SlowDelay
	switch {
	case hit == 0:
	case sc.Fault == scenario.SlowFirstByte:
		slow, delay = true, sc.Delay
	case sc.Fault == scenario.HoldEnd:
		inject.holdEnd = sc.Delay
	case sc.Fault == scenario.Fail:
		inject.fail503 = hit%2 == 1
		inject.reset = !inject.fail503
	}
	if slow {
		p.faults.WithLabelValues("slow_first_byte").Inc()
		if !sleep(r, delay) {
			return
		}
	}
	if inject.fail503 || f.Status5xx > 0 && rng.Float64() < f.Status5xx {
		p.faults.WithLabelValues("5xx").Inc()
		p.fail(w, http.StatusServiceUnavailable, "server_error", "injected fault: the model is overloaded")
		return
	}
	p.inFlight.Inc()
	defer p.inFlight.Dec()
	sent, err := p.stream(w, r, rng, id, length, inject)
	p.events.Add(float64(sent))
	level := zerolog.DebugLevel
	if err != nil {
		level = zerolog.InfoLevel
	}
	p.log.WithLevel(level).Str("id", id).Int("events", sent).Int("length", length).AnErr("error", err).Msg("stream")
}

func (p *Provider) length(rng *rand.Rand, maxTokens *int) (int, error) {
	if maxTokens != nil {
		if *maxTokens < 1 || *maxTokens > p.cfg.MaxTokens {
			return 0, fmt.Errorf("max_tokens must be in 1–%d, got %d", p.cfg.MaxTokens, *maxTokens)
		}
		return *maxTokens, nil
	}
	if rng.Float64() < p.cfg.LongShare {
		return p.cfg.LongMin + rng.IntN(p.cfg.LongMax-p.cfg.LongMin+1), nil
	}
	return p.cfg.ShortMin + rng.IntN(p.cfg.ShortMax-p.cfg.ShortMin+1), nil
}

var errReset = errors.New("injected fault: connection reset")

// injected is what a scenario does to one stream.
type injected struct {
	fail503, reset bool
	holdEnd        time.Duration // before the last event
}

// stream sends length content events and [DONE]. The `index` field of a
// choice is left out on purpose: with it, an OpenAI chunk has no room for
// content within the write-up's 96 characters; clients default it to 0.
func (p *Provider) stream(w http.ResponseWriter, r *http.Request, rng *rand.Rand, id string, length int, inject injected) (int, error) {
	f := p.cfg.Faults
	resetAt, malformedAt := -1, -1
	if f.Reset > 0 && rng.Float64() < f.Reset {
		resetAt = rng.IntN(length)
	}
	if inject.reset {
		resetAt = length / 2 // after some tokens went out: a cut, not a refusal
	}
	if f.Malformed > 0 && rng.Float64() < f.Malformed {
		malformedAt = rng.IntN(length)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	p.requestsTotal.WithLabelValues("200").Inc()
	bw := bufio.NewWriterSize(w, 32<<10)
	rc := http.NewResponseController(w)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	if p.cfg.FirstTokenDelay > 0 {
		if err := flush(); err != nil {
			return 0, err
		}
		if !sleep(r, p.cfg.FirstTokenDelay) {
			return 0, r.Context().Err()
		}
	}
	head := []byte(`data: {"id":"` + id + `","object":"chat.completion.chunk","choices":[{"delta":{"content":`)
	var line []byte
	toks := tokens.New(rng, p.cfg.PIIEvery)
	sent := 0
	for i := range length {
		if i == resetAt {
			p.faults.WithLabelValues("reset").Inc()
			_ = flush() // the reset comes either way; a failed flush only ends the stream sooner
			return sent, reset(w)
		}
		if i == malformedAt {
			p.faults.WithLabelValues("malformed").Inc()
			bw.WriteString("this line is not an SSE field\n")
		}
		line = openai.AppendQuote(append(line[:0], head...), []byte(toks.Next()))
		line = append(line, "}}]}\n\n"...)
		if _, err := bw.Write(line); err != nil {
			return sent, err
		}
		sent++
		if p.cfg.InterEvent > 0 {
			if err := flush(); err != nil {
				return sent, err
			}
			if !sleep(r, p.cfg.InterEvent) {
				return sent, r.Context().Err()
			}
		}
	}
	if inject.holdEnd > 0 {
		p.faults.WithLabelValues("hold_end").Inc()
		// Everything so far reaches the client first: the hold is a slow
		// last token, not a slow stream.
		if err := flush(); err != nil {
			return sent, err
		}
		if !sleep(r, inject.holdEnd) {
			return sent, r.Context().Err()
		}
	}
	bw.WriteString(`data: {"id":"` + id + `","object":"chat.completion.chunk","choices":[{"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	bw.WriteString("data: [DONE]\n\n")
	return sent, flush()
}

// complete answers a non-streaming request with the whole text at once.
// While the provider-regression scenario runs, the text is built by
// concatText instead of appendText: the same words, in quadratic time.
func (p *Provider) complete(ctx context.Context, w http.ResponseWriter, rng *rand.Rand, id string, length int) {
	render := appendText
	if p.Scenarios.regressed() {
		render = concatText
	}
	text := render(ctx, rng, length)
	w.Header().Set("Content-Type", "application/json")
	p.requestsTotal.WithLabelValues("200").Inc()
	// An error here is a client gone before its answer: nothing to do.
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": "burnlab-synthetic",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]string{"role": "assistant", "content": text}}},
		"usage": map[string]int{"completion_tokens": length},
	})
}

// appendText draws length words into one growing buffer: amortised
// linear time.
func appendText(_ context.Context, rng *rand.Rand, length int) string {
	var text []byte
	for range length {
		text = append(text, tokens.Word(rng)...)
	}
	return string(text)
}

// concatText is the provider's own regression, the write-up's mistake made
// again in another service: each word is added with +=, which copies the
// whole text so far into a new string. A 300-word answer hardly notices;
// a 24,000-word one copies over a gigabyte, and its garbage makes
// concatText the top of the provider's alloc_space. A client that leaves
// stops it: a hostile max_tokens costs what it waited for, no more.
func concatText(ctx context.Context, rng *rand.Rand, length int) string {
	var text string
	for i := range length {
		if i%1024 == 0 && ctx.Err() != nil {
			return text
		}
		text += tokens.Word(rng)
	}
	return text
}

func (p *Provider) fail(w http.ResponseWriter, status int, kind, msg string) {
	p.requestsTotal.WithLabelValues(strconv.Itoa(status)).Inc()
	openai.WriteError(w, status, kind, msg)
}

func sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// reset aborts the connection with a TCP RST, as a crashed provider would.
func reset(w http.ResponseWriter) error {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // best effort: without it the close is a FIN, still a cut stream
	}
	conn.Close()
	return errReset
}
