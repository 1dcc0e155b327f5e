// Package proxy is the gateway's streaming handler: it authenticates and
// admits a chat request (request.go), calls the upstream model provider
// (upstream.go), and forwards its SSE token stream event by event —
// redacting PII and building the audit transcript on the way, with
// coalesced writes (forward.go) — while counting what it forwards and
// charging the tenant (accounting.go). Each stream ends with one result
// (result.go), from which its metrics and log line are made.
//
// # Forwarding a token stream
//
// The upstream sends an event a token. Its data is a chunk: a JSON document
// in which a few strings are texts, the model output a client shows
// (chunk.Field). Each text belongs to a text stream, one for each choice,
// field and tool call (chunk.Key), redacted by a redactor of its own
// (redact.Redactor). A redactor
// holds back a tail that may still become PII when the next chunk's text
// arrives.
//
// The shape of a chunk with one text is its bytes outside that text: what
// comes before the text's opening quote and after its closing quote. A
// provider sends nearly every chunk of a stream in one shape (the same id,
// choice and field; only the token differs). chunk.Scanner parses a chunk
// in full (a walk), but takes one in the shape of the last chunk it walked
// without a walk.
// The scanner numbers its full walks, and Scanner.Shape reports the number
// and whether the last chunk took the shortcut: two chunks that took it
// with the same number have the same shape.
//
// The common token is the chunk nearly every event is: in the shape of the
// last chunk walked, with one text that has no escapes, and no finish
// reason.
//
// forward.go builds the data lines of each event in one of four ways:
//   - The general path (forwardChunk) takes any JSON chunk. It finds each
//     text's stream, decodes its escapes, redacts it, and writes the chunk
//     with its texts redacted in place.
//   - The fast path (commonToken) takes only the common token, and writes
//     the line the general path would, without its lookups and copies.
//     FuzzRewriter holds the two paths to the same output.
//   - A release writes what a text stream still holds back when its choice
//     or the stream ends, as an event of the gateway's own, in the shape of
//     the last chunk that left text held back (the stream's release
//     template).
//   - Data that is not JSON is redacted as plain text (forwardText), unless
//     it holds a backslash, which a lenient decoder would read as an
//     escape: then it is not forwarded at all.
//
// So that the common token copies nothing, two things are kept across
// chunks of one shape: the fast path's line up to the text (tokenShape),
// and each text stream's release template while it holds text back, copied
// again only when the shape changes.
package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/trace"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"burnlab/gateway/internal/tenant"
	"burnlab/gateway/internal/transcript"
	"burnlab/shared/openai"
	"burnlab/shared/service"
)

// Routes the gateway serves; the first is the one the SLO watches.
const (
	RouteStream      = "/v1/chat/stream"
	RouteCompletions = "/v1/chat/completions"
)

// Config is what a Handler needs. Zero durations and sizes take the
// defaults noted on each field.
type Config struct {
	Upstream *url.URL
	Tenants  *tenant.Registry
	Metrics  *Metrics
	Log      zerolog.Logger
	// Variant names the transcript builder; NewTranscript makes one per
	// stream, which the gateway releases when the stream is recorded.
	Variant       string
	NewTranscript func() transcript.Transcript
	// Client calls the upstream (default: a transport tuned for streaming
	// with UpstreamTimeout for response headers).
	Client *http.Client
	// UpstreamTimeout bounds the wait for the upstream's answer, from the
	// request on: its response headers and, when it refuses, the error
	// body the gateway quotes; past it the client gets 504, or 502 with
	// what arrived (default 10 s).
	UpstreamTimeout time.Duration
	// IdleTimeout bounds how long one read of the upstream body may wait
	// mid-stream (default 30 s). Time spent writing to a slow client is
	// not counted: ClientWriteTimeout bounds that.
	IdleTimeout time.Duration
	// ClientWriteTimeout bounds how long a client may stop reading before
	// the stream is given up (default 30 s).
	ClientWriteTimeout time.Duration
	// MaxLine bounds one upstream SSE line (default 1 MiB).
	MaxLine int
	// MaxBody bounds the request body (default 1 MiB).
	MaxBody int64
	// Limits bound what one upstream stream may cost.
	Limits Limits
	// drainWait bounds the wait for the upstream body's end after [DONE]
	// (keepConnection; default drainWait). Tests lengthen it, so a
	// loaded machine cannot decide whether a connection is kept.
	drainWait time.Duration
}

// Handler serves the gateway's public API.
type Handler struct {
	cfg Config
	// endpoint is where chat requests go: Endpoint(cfg.Upstream).
	endpoint string
	mux      *http.ServeMux
}

// Endpoint returns the URL the gateway posts chat requests to, given the
// provider's base URL, or an error that says which form to use.
//
// A base URL comes in two forms: http://host:port, and http://host:port/v1,
// the one every OpenAI SDK takes. Both name the same endpoint: a base whose
// path ends in /v1 gets /chat/completions, any other base
// /v1/chat/completions (after its own path, so a provider behind a prefix,
// http://host/openai, works too). A URL that already ends in
// /chat/completions is the endpoint itself: joined again it would answer
// 404 to every request, so it is refused, with the base URL to use.
func Endpoint(base *url.URL) (*url.URL, error) {
	switch {
	case base == nil || base.Host == "":
		return nil, fmt.Errorf("upstream URL %q must be absolute, http://host:port or http://host:port/v1", base)
	case base.Scheme != "http" && base.Scheme != "https":
		return nil, fmt.Errorf("upstream URL %q: the scheme must be http or https", base)
	}
	path := strings.TrimRight(base.Path, "/")
	if prefix, ok := strings.CutSuffix(path, "/chat/completions"); ok {
		fixed := *base
		fixed.Path, fixed.RawPath = prefix, ""
		return nil, fmt.Errorf("upstream URL %q is the chat endpoint, not the base URL: use %s", base, &fixed)
	}
	if strings.HasSuffix(path, "/v1") {
		return base.JoinPath("chat/completions"), nil
	}
	return base.JoinPath("v1/chat/completions"), nil
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	endpoint, err := Endpoint(cfg.Upstream)
	switch {
	case err != nil:
		return nil, fmt.Errorf("proxy: %w", err)
	case cfg.Tenants == nil:
		return nil, errors.New("proxy: no tenants")
	case cfg.Metrics == nil:
		return nil, errors.New("proxy: no metrics")
	case cfg.NewTranscript == nil:
		return nil, errors.New("proxy: no transcript builder")
	case cfg.Limits.Events < 0 || cfg.Limits.Bytes < 0 || cfg.Limits.Duration < 0 || cfg.Limits.Transcript < 0 || cfg.Limits.Held < 0:
		return nil, fmt.Errorf("proxy: stream limits must not be negative (0 takes the default): %+v", cfg.Limits)
	}
	cfg.UpstreamTimeout = orDefault(cfg.UpstreamTimeout, 10*time.Second)
	cfg.drainWait = orDefault(cfg.drainWait, drainWait)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, 30*time.Second)
	cfg.ClientWriteTimeout = orDefault(cfg.ClientWriteTimeout, 30*time.Second)
	cfg.MaxLine = orDefault(cfg.MaxLine, 1<<20)
	cfg.MaxBody = orDefault(cfg.MaxBody, 1<<20)
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: cfg.UpstreamTimeout,
			DisableCompression:    true, // SSE must not wait on a compressor
		}}
	}
	// A gateway never follows its upstream's redirects: Go's client would
	// re-send the request, the user's prompt and all, to any host a
	// Location names (307 and 308 keep the body). The redirect is answered
	// as it is, and proxy refuses it. A copy, so the caller's client is
	// left as it was.
	client := *cfg.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &client
	h := &Handler{cfg: cfg, endpoint: endpoint.String(), mux: http.NewServeMux()}
	for _, route := range []string{RouteStream, RouteCompletions} {
		h.mux.Handle(route, h.streamHandler(route))
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		openai.WriteError(w, http.StatusNotFound, "invalid_request_error", "no route "+r.URL.Path+"; use POST "+RouteStream)
	})
	return h, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) streamHandler(route string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &stream{route: route, id: requestID(r), acct: accounting{start: time.Now()}, lim: h.cfg.Limits}
		w.Header().Set("X-Request-Id", s.id)
		// Each stream is a task of the execution trace, so a pager can
		// split a slow stream's time from a flight-recorder snapshot.
		ctx, task := trace.NewTask(r.Context(), service.TraceTask)
		trace.Log(ctx, service.TraceRequestID, s.id)
		defer func() {
			trace.Log(ctx, service.TraceRequestID, s.id)
			task.End()
		}()
		r = r.WithContext(ctx)
		h.cfg.Metrics.inFlight.Inc()
		// Deferred, so a panic in the handler (net/http recovers it) still
		// leaves the gauge right and the stream recorded.
		var res result
		defer func() {
			h.cfg.Metrics.inFlight.Dec()
			if res.outcome == "" {
				res = result{outcome: OutcomeUpstreamError, err: "the handler panicked"}
			}
			h.record(s, res)
		}()
		res = h.serve(w, r, s)
	})
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, s *stream) result {
	req, res := h.admit(w, r, s)
	if req == nil {
		return res
	}
	defer req.release()
	return h.proxy(w, r, s, req)
}
