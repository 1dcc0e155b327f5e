// Package proxy is the gateway's streaming handler: it authenticates and
// admits a chat request, calls the upstream model provider, and forwards its
// SSE token stream event by event — counting tokens, redacting PII and
// building the audit transcript on the way — with coalesced writes.
package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"burnlab/gateway/internal/chunk"
	"burnlab/gateway/internal/redact"
	"burnlab/gateway/internal/sse"
	"burnlab/gateway/internal/tenant"
	"burnlab/gateway/internal/transcript"
)

// Routes the gateway serves; the first is the one the SLO watches.
const (
	RouteStream      = "/v1/chat/stream"
	RouteCompletions = "/v1/chat/completions"
)

// Reasons for gateway_upstream_errors_total. The first group ends a stream;
// the last three are repaired in place and the stream goes on.
const (
	reasonConnect      = "connect"
	reasonTimeout      = "timeout"
	reason4xx          = "status_4xx"
	reason5xx          = "status_5xx"
	reasonContentType  = "content_type"
	reasonReset        = "reset"
	reasonIdle         = "idle_timeout"
	reasonNoDone       = "eof_without_done"
	reasonLineTooLong  = "line_too_long"
	reasonMalformed    = "malformed_line"
	reasonInvalidJSON  = "invalid_json"
	reasonInvalidUTF8  = "invalid_utf8"
	reasonTooManyTexts = "too_many_texts"
)

var allReasons = []string{reasonConnect, reasonTimeout, reason4xx, reason5xx, reasonContentType, reasonReset,
	reasonIdle, reasonNoDone, reasonLineTooLong, reasonMalformed, reasonInvalidJSON, reasonInvalidUTF8, reasonTooManyTexts}

// Config is what a Handler needs. Zero durations and sizes take the
// defaults noted on each field.
type Config struct {
	Upstream *url.URL
	Tenants  *tenant.Registry
	Metrics  *Metrics
	Log      zerolog.Logger
	// Variant names the transcript builder; NewTranscript makes one per
	// stream, given the number of events the request asked for (0: unknown).
	Variant       string
	NewTranscript func(eventsHint int) transcript.Transcript
	// Client calls the upstream (default: a transport tuned for streaming
	// with UpstreamTimeout for response headers).
	Client *http.Client
	// UpstreamTimeout bounds the wait for the upstream's response headers;
	// past it the client gets 504 (default 10 s).
	UpstreamTimeout time.Duration
	// IdleTimeout bounds the silence between upstream reads mid-stream
	// (default 30 s).
	IdleTimeout time.Duration
	// ClientWriteTimeout bounds how long a client may stop reading before
	// the stream is given up (default 30 s).
	ClientWriteTimeout time.Duration
	// MaxLine bounds one upstream SSE line (default 1 MiB).
	MaxLine int
	// MaxBody bounds the request body (default 1 MiB).
	MaxBody int64
}

// Handler serves the gateway's public API.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Upstream == nil || cfg.Upstream.Scheme == "" || cfg.Upstream.Host == "":
		return nil, errors.New("proxy: upstream URL must be absolute, e.g. http://upstream:8081")
	case cfg.Tenants == nil:
		return nil, errors.New("proxy: no tenants")
	case cfg.Metrics == nil:
		return nil, errors.New("proxy: no metrics")
	case cfg.NewTranscript == nil:
		return nil, errors.New("proxy: no transcript builder")
	}
	cfg.UpstreamTimeout = orDefault(cfg.UpstreamTimeout, 10*time.Second)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, 30*time.Second)
	cfg.ClientWriteTimeout = orDefault(cfg.ClientWriteTimeout, 30*time.Second)
	cfg.MaxLine = orDefault(cfg.MaxLine, 1<<20)
	cfg.MaxBody = orDefault(cfg.MaxBody, 1<<20)
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
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	for _, route := range []string{RouteStream, RouteCompletions} {
		h.mux.Handle(route, h.streamHandler(route))
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no route "+r.URL.Path+"; use POST "+RouteStream)
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

// stream is the state of one request.
type stream struct {
	route, id string
	tenant    *tenant.Tenant
	start     time.Time
	status    int
	outcome   string
	reason    string
	detail    string
	ttft      time.Duration
	events    int
	tokens    int
	charged   int
	repaired  map[string]int
	tr        transcript.Transcript

	// texts are the response's text streams, each redacted with its own
	// hold-back state, in order of first appearance.
	texts   []*textStream
	scanner chunk.Scanner
	// Reused per event: the decoded texts (s.ends[i] closes the i-th), a
	// redaction, the line out.
	text, red, out []byte
	ends           []int
}

// textStream is one text of a response that arrives over many chunks: a
// choice's content, refusal or reasoning, or one tool call's arguments.
// PII split across two chunks of one stream is caught by its redactor's
// hold-back; two streams never mix.
type textStream struct {
	key chunk.Key
	red redact.Redactor
	// The last chunk that left text held back: the final release goes out
	// in the upstream's own shape for this stream.
	tmpl []byte
}

// maxTextStreams bounds the redaction state one response may open (n
// choices × their fields and tool calls).
const maxTextStreams = 64

// textStream finds or opens the stream of key; nil past maxTextStreams.
func (s *stream) textStream(key chunk.Key) *textStream {
	for _, t := range s.texts {
		if t.key == key {
			return t
		}
	}
	if len(s.texts) == maxTextStreams {
		return nil
	}
	t := &textStream{key: key}
	s.texts = append(s.texts, t)
	return t
}

func (h *Handler) streamHandler(route string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &stream{route: route, start: time.Now(), id: requestID(r)}
		w.Header().Set("X-Request-Id", s.id)
		h.cfg.Metrics.inFlight.Inc()
		h.serve(w, r, s)
		h.cfg.Metrics.inFlight.Dec()
		h.finish(s)
	})
}

// finish records one stream: its metrics and its one log line. Content is
// never logged, only counts.
func (h *Handler) finish(s *stream) {
	m := h.cfg.Metrics
	elapsed := time.Since(s.start)
	m.duration.WithLabelValues(s.route, s.outcome).Observe(elapsed.Seconds())
	m.events.Add(float64(s.events))
	if s.tenant != nil {
		m.tokens.WithLabelValues(s.tenant.Name).Add(float64(s.tokens))
		h.cfg.Tenants.Charge(s.tenant, s.tokens-s.charged)
	}
	var counts [redact.NumKinds]int
	for _, t := range s.texts {
		for k, n := range t.red.Counts() {
			counts[k] += n
		}
	}
	redactions := 0
	for k, n := range counts {
		if n > 0 {
			m.redactions.WithLabelValues(redact.Kind(k).String()).Add(float64(n))
			redactions += n
		}
	}
	if s.reason != "" {
		m.upstreamErr.WithLabelValues(s.reason).Inc()
	}
	for reason, n := range s.repaired {
		m.upstreamErr.WithLabelValues(reason).Add(float64(n))
	}
	level := zerolog.InfoLevel
	if s.outcome == OutcomeUpstreamError {
		level = zerolog.WarnLevel
	}
	ev := h.cfg.Log.WithLevel(level).
		Str("request_id", s.id).
		Str("route", s.route).
		Int("status", s.status).
		Str("outcome", s.outcome).
		Int("events", s.events).
		Int("tokens", s.tokens).
		Int("redactions", redactions).
		Float64("duration_ms", float64(elapsed.Microseconds())/1000).
		Str("variant", h.cfg.Variant)
	if s.tenant != nil {
		ev = ev.Str("tenant", s.tenant.Name)
	}
	if s.ttft > 0 {
		m.ttft.WithLabelValues(s.route).Observe(s.ttft.Seconds())
		ev = ev.Float64("ttft_ms", float64(s.ttft.Microseconds())/1000)
	}
	if s.tr != nil {
		ev = ev.Int("transcript_bytes", len(s.tr.String()))
	}
	if s.reason != "" {
		ev = ev.Str("reason", s.reason)
	}
	if len(s.repaired) > 0 {
		ev = ev.Interface("repaired", s.repaired)
	}
	if s.detail != "" {
		ev = ev.Str("error", s.detail)
	}
	ev.Msg("stream")
}

// chatRequest holds the few fields the gateway reads; the body is forwarded
// upstream as the client sent it.
type chatRequest struct {
	Stream    *bool `json:"stream"`
	MaxTokens int   `json:"max_tokens"`
}

// reject answers before any stream started.
func (s *stream) reject(w http.ResponseWriter, status int, outcome, kind, msg string) {
	s.status, s.outcome, s.detail = status, outcome, msg
	writeError(w, status, kind, msg)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, s *stream) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.reject(w, http.StatusMethodNotAllowed, OutcomeRejected, "invalid_request_error", "use POST for "+s.route)
		return
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	t, err := h.cfg.Tenants.Authenticate(strings.TrimSpace(key))
	if !ok || err != nil {
		s.reject(w, http.StatusUnauthorized, OutcomeRejected, "authentication_error", "missing or unknown API key: send Authorization: Bearer <key>")
		return
	}
	s.tenant = t
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			s.reject(w, http.StatusRequestEntityTooLarge, OutcomeRejected, "invalid_request_error", fmt.Sprintf("request body over %d bytes", tooBig.Limit))
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The server's read deadline: a client trickling its body
			// must not hold a handler.
			s.reject(w, http.StatusRequestTimeout, OutcomeRejected, "invalid_request_error", "request body did not arrive within the read timeout")
		default:
			s.outcome, s.detail = OutcomeClientCanceled, "reading request: "+err.Error()
		}
		return
	}
	// The read deadline covered the request; a stream lasts longer, and
	// a deadline left on the connection would cancel it when it fires.
	if err := http.NewResponseController(w).SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.outcome, s.detail = OutcomeClientCanceled, "lifting the read deadline: "+err.Error()
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.reject(w, http.StatusBadRequest, OutcomeRejected, "invalid_request_error", "request body is not a JSON chat request: "+err.Error())
		return
	}
	if req.Stream == nil || !*req.Stream {
		s.reject(w, http.StatusBadRequest, OutcomeRejected, "invalid_request_error", `this gateway only streams: set "stream": true`)
		return
	}
	release, wait, err := h.cfg.Tenants.Admit(t)
	if err != nil {
		limit, msg := limitTokens, fmt.Sprintf("tenant %s has spent its %d tokens per minute", t.Name, t.TokensPerMinute)
		if errors.Is(err, tenant.ErrTooManyStreams) {
			limit, msg = limitStreams, fmt.Sprintf("tenant %s already has %d streams in flight, its limit", t.Name, t.MaxStreams)
		}
		h.cfg.Metrics.rejections.WithLabelValues(t.Name, limit).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		s.reject(w, http.StatusTooManyRequests, OutcomeRejected, "rate_limit_error", msg)
		return
	}
	defer release()
	h.proxy(w, r, s, body, req.MaxTokens)
}

var (
	errIdle       = errors.New("upstream sent nothing within the idle timeout")
	errClientGone = errors.New("client stopped reading")
)

func (h *Handler) proxy(w http.ResponseWriter, r *http.Request, s *stream, body []byte, maxTokens int) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	upURL := h.cfg.Upstream.JoinPath("/v1/chat/completions")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upURL.String(), bytes.NewReader(body))
	if err != nil {
		s.reject(w, http.StatusBadGateway, OutcomeUpstreamError, "upstream_error", err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Request-Id", s.id)
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		var ne net.Error
		switch {
		case r.Context().Err() != nil:
			s.outcome, s.detail = OutcomeClientCanceled, "client went away before the upstream answered"
		case errors.As(err, &ne) && ne.Timeout():
			s.reason = reasonTimeout
			s.reject(w, http.StatusGatewayTimeout, OutcomeUpstreamError, "timeout",
				fmt.Sprintf("upstream did not answer within %s", h.cfg.UpstreamTimeout))
		default:
			s.reason = reasonConnect
			s.reject(w, http.StatusBadGateway, OutcomeUpstreamError, "upstream_error", "upstream unreachable: "+err.Error())
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.upstreamStatus(w, s, resp)
		return
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		s.reason = reasonContentType
		s.reject(w, http.StatusBadGateway, OutcomeUpstreamError, "upstream_error", fmt.Sprintf("upstream answered %q, not an event stream", ct))
		return
	}

	idle := time.AfterFunc(h.cfg.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	rd := sse.NewReader(idleReader{resp.Body, idle, h.cfg.IdleTimeout}, 64<<10, h.cfg.MaxLine)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.status = http.StatusOK
	s.tr = h.cfg.NewTranscript(maxTokens)
	s.text, s.red, s.out = make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 512)

	out := newFlusher(w, h.cfg.ClientWriteTimeout)
	defer out.rc.SetWriteDeadline(time.Time{}) // a kept-alive connection must not inherit it
	err = h.forward(rd, out, s)
	switch {
	case err == nil:
		s.outcome = OutcomeOK
	case errors.Is(err, errClientGone) || r.Context().Err() != nil:
		s.outcome, s.detail = OutcomeClientCanceled, err.Error()
	default:
		s.outcome, s.detail = OutcomeUpstreamError, err.Error()
		s.reason = classifyReadError(err, context.Cause(ctx))
		// What was accepted is not lost: release the held tail, then
		// tell the client why the stream ends without [DONE].
		h.flushTail(out, s)
		out.line(errorEvent("upstream_error", "stream from upstream ended: "+err.Error()))
		out.line(nil)
		out.flush()
	}
}

func classifyReadError(err, cause error) string {
	switch {
	case errors.Is(cause, errIdle):
		return reasonIdle
	case errors.Is(err, sse.ErrLineTooLong):
		return reasonLineTooLong
	case errors.Is(err, io.EOF):
		return reasonNoDone
	}
	return reasonReset
}

// requestErrors are the upstream answers that blame the request itself
// (an unknown model, a bad parameter): the client's mistake, passed back
// as it is and recorded as rejected, so it burns no availability budget.
// Every other 4xx — 401/403 (the gateway's own upstream credentials),
// 408, 429 (the provider's capacity) — is the service's problem.
var requestErrors = map[int]bool{
	http.StatusBadRequest: true, http.StatusNotFound: true, http.StatusConflict: true,
	http.StatusRequestEntityTooLarge: true, http.StatusUnsupportedMediaType: true, http.StatusUnprocessableEntity: true,
}

// upstreamStatus maps an upstream's non-200 answer to a client error: the
// client learns what the upstream said, and a 429 keeps its Retry-After.
func (h *Handler) upstreamStatus(w http.ResponseWriter, s *stream, resp *http.Response) {
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := fmt.Sprintf("upstream answered %s", resp.Status)
	if text := strings.TrimSpace(strings.ToValidUTF8(string(snippet), "")); text != "" {
		redacted, _ := redact.Text([]byte(text))
		msg += ": " + string(redacted)
	}
	switch code := resp.StatusCode; {
	case requestErrors[code]:
		s.reject(w, code, OutcomeRejected, "invalid_request_error", msg)
	case code == http.StatusTooManyRequests:
		s.reason = reason4xx
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		s.reject(w, http.StatusTooManyRequests, OutcomeUpstreamError, "rate_limit_error", msg)
	default:
		s.reason = reason5xx
		if code < 500 {
			s.reason = reason4xx
		}
		s.reject(w, http.StatusBadGateway, OutcomeUpstreamError, "upstream_error", msg)
	}
}

// forward is the per-event loop. It returns nil once [DONE] is forwarded.
func (h *Handler) forward(rd *sse.Reader, out *flusher, s *stream) error {
	for {
		if !rd.Buffered() {
			// The next read may block: nothing written may wait on it.
			h.cfg.Tenants.Charge(s.tenant, s.tokens-s.charged)
			s.charged = s.tokens
			if err := out.flush(); err != nil {
				return err
			}
		}
		line, err := rd.ReadLine()
		if err != nil {
			return err
		}
		if !utf8.Valid(line) {
			s.repair(reasonInvalidUTF8)
			line = bytes.ToValidUTF8(line, []byte("\uFFFD"))
		}
		field, value, isField := bytes.Cut(line, []byte{':'})
		switch {
		case len(line) == 0 || line[0] == ':':
			// An event boundary or a comment (keep-alive): pass through.
			out.line(line)
		case !isField:
			s.repair(reasonMalformed)
		case string(field) == "data":
			value = bytes.TrimPrefix(value, []byte{' '})
			if string(value) == "[DONE]" {
				h.flushTail(out, s)
				out.line(line)
				out.line(nil)
				return out.flush()
			}
			h.dataEvent(out, s, value)
		case string(field) == "event" || string(field) == "id" || string(field) == "retry":
			out.line(line)
		default:
			s.repair(reasonMalformed)
		}
		if out.err != nil {
			return out.err
		}
	}
}

func (s *stream) repair(reason string) {
	if s.repaired == nil {
		s.repaired = map[string]int{}
	}
	s.repaired[reason]++
}

// dataEvent forwards one data payload with every text in it redacted
// (each text stream holding back a tail that may still become PII),
// counted, and added to the transcript by the build's parser. The rest of a
// chunk (ids, model, role, finish reason, numbers) is metadata and passes
// as it came: redacting it as text would turn a "created" timestamp into a
// phone number and the chunk into invalid JSON.
func (h *Handler) dataEvent(out *flusher, s *stream, payload []byte) {
	spans, err := s.scanner.Scan(payload)
	reason := reasonInvalidJSON
	switch {
	case err == nil:
		if reason = s.rewrite(payload, spans); reason == "" {
			s.emit(out)
			return
		}
	case errors.Is(err, chunk.ErrTooMany):
		reason = reasonTooManyTexts
	}
	// Not a chunk the gateway can read: redacted as plain text, so
	// nothing unparsable carries PII past it.
	s.repair(reason)
	red, _ := redact.Text(payload)
	s.out = append(append(s.out[:0], dataPrefix...), red...)
	s.emit(out)
}

var dataPrefix = []byte("data: ")

// rewrite builds in s.out the event line of payload with each text span
// redacted by its stream, or returns why it could not (a repair reason).
func (s *stream) rewrite(payload []byte, spans []chunk.Span) string {
	// Decode every span before any redactor sees one, so a chunk given up
	// half-way leaves no stream holding text that was never forwarded.
	s.text, s.ends = s.text[:0], s.ends[:0]
	for _, sp := range spans {
		var err error
		if s.text, err = chunk.AppendUnquote(s.text, payload[sp.Start:sp.End]); err != nil {
			return reasonInvalidJSON
		}
		if s.textStream(sp.Key) == nil {
			return reasonTooManyTexts
		}
		s.ends = append(s.ends, len(s.text))
	}
	s.out = append(s.out[:0], dataPrefix...)
	last, from := 0, 0
	for i, sp := range spans {
		t := s.textStream(sp.Key)
		text := s.text[from:s.ends[i]]
		from = s.ends[i]
		if len(text) > 0 {
			s.tokens++
			if s.ttft == 0 {
				s.ttft = time.Since(s.start)
			}
		}
		s.red = t.red.Redact(s.red[:0], text)
		s.out = append(s.out, payload[last:sp.Start]...)
		s.out = chunk.AppendQuote(s.out, s.red)
		last = sp.End
		if t.red.Pending() {
			t.tmpl = append(t.tmpl[:0], payload...)
		}
	}
	s.out = append(s.out, payload[last:]...)
	return ""
}

// flushTail releases every stream's held tail as one more event each, in
// the shape of the last chunk that held it back, with that chunk's other
// texts emptied: they were forwarded already.
func (h *Handler) flushTail(out *flusher, s *stream) {
	for _, t := range s.texts {
		if !t.red.Pending() {
			continue
		}
		s.red = t.red.Flush(s.red[:0])
		spans, err := s.scanner.Scan(t.tmpl)
		if err != nil { // cannot happen: tmpl is a chunk Scan accepted
			continue
		}
		s.out = append(s.out[:0], dataPrefix...)
		last := 0
		for _, sp := range spans {
			s.out = append(s.out, t.tmpl[last:sp.Start]...)
			if sp.Key == t.key {
				s.out = chunk.AppendQuote(s.out, s.red)
			} else {
				s.out = append(s.out, `""`...)
			}
			last = sp.End
		}
		s.out = append(s.out, t.tmpl[last:]...)
		s.emit(out)
		out.line(nil) // close the event the gateway made
	}
}

// emit forwards the data line in s.out and feeds it to the transcript.
func (s *stream) emit(out *flusher) {
	transcript.AppendLine(s.tr, s.out)
	out.line(s.out)
	s.events++
}

// idleReader re-arms the idle timer on every read of the upstream body.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (ir idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	ir.timer.Reset(ir.d)
	return n, err
}

func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && isToken(id) {
		return id
	}
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func isToken(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func errorBody(kind, msg string) []byte {
	var e apiError
	e.Error.Message, e.Error.Type = msg, kind
	b, _ := json.Marshal(e)
	return b
}

// writeError answers in OpenAI's error shape.
func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(errorBody(kind, msg), '\n'))
}

// errorEvent is the same error as an SSE event, for a stream whose 200 is
// already sent.
func errorEvent(kind, msg string) []byte {
	return append(append([]byte(nil), dataPrefix...), errorBody(kind, msg)...)
}
