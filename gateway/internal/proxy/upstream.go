package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"burnlab/gateway/internal/redact"
	"burnlab/gateway/internal/sse"
	"burnlab/shared/openai"
)

var (
	errIdle       = errors.New("upstream sent nothing within the idle timeout")
	errClientGone = errors.New("client stopped reading")
	// errQuotaSpent ends a stream that went past its reservation (an
	// upstream that ignores max_tokens) when its tenant's balance cannot
	// cover more.
	errQuotaSpent = errors.New("the tenant's token quota is spent")
	// errNoAnswer cuts an exchange whose answer (its status, and when it
	// refuses, the error body the gateway quotes) took longer than the
	// upstream timeout.
	errNoAnswer = errors.New("upstream did not answer within the upstream timeout")
)

// proxy calls the upstream with an admitted request and, once it answers
// with an event stream, forwards it.
func (h *Handler) proxy(w http.ResponseWriter, r *http.Request, s *stream, req *admitted) result {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// Both bounds run from the request on. The client has no response
	// headers until the upstream's answer is read: the answer timer cuts an
	// upstream that sends its status, or an error body, a byte at a time
	// (the idle timer alone restarts on every byte). The wall-clock limit
	// covers the whole exchange, the answer included.
	lim := h.cfg.Limits
	wall := time.AfterFunc(lim.Duration, func() { cancel(limitError{lim.Duration.String()}) })
	defer wall.Stop()
	answer := time.AfterFunc(h.cfg.UpstreamTimeout, func() { cancel(errNoAnswer) })
	defer answer.Stop()
	upReq, err := http.NewRequestWithContext(ctx, http.MethodPost, h.endpoint, bytes.NewReader(req.body))
	if err != nil {
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonConnect, "upstream_error", err.Error())
	}
	upReq.Header.Set("Content-Type", "application/json")
	upReq.Header.Set("Accept", "text/event-stream")
	upReq.Header.Set("X-Request-Id", s.id)
	// The URL is the configured upstream's, never the client's, and the
	// client never follows a redirect (New): no SSRF.
	resp, err := h.cfg.Client.Do(upReq) //nolint:gosec // G704: see above
	if err != nil {
		var ne net.Error
		switch {
		case r.Context().Err() != nil:
			return gone("client went away before the upstream answered")
		case errors.As(err, &ne) && ne.Timeout() || errors.Is(context.Cause(ctx), errNoAnswer):
			return refuse(w, http.StatusGatewayTimeout, OutcomeUpstreamError, reasonTimeout, "timeout",
				fmt.Sprintf("upstream did not answer within %s", h.cfg.UpstreamTimeout))
		}
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonConnect, "upstream_error", "upstream unreachable: "+err.Error())
	}
	defer resp.Body.Close()
	// Stopped until the first read arms it (idleReader): an error's body
	// is read under it too.
	idle := time.AfterFunc(h.cfg.IdleTimeout, func() { cancel(errIdle) })
	idle.Stop()
	defer idle.Stop()
	switch {
	case isRedirect(resp.StatusCode):
		// Followed, it would re-send the client's prompt to wherever the
		// upstream points, and stream that host's answer back as ours.
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonRedirect, "upstream_error",
			fmt.Sprintf("upstream answered %s, a redirect, which the gateway never follows", resp.Status))
	case resp.StatusCode != http.StatusOK:
		return upstreamRefusal(ctx, w, resp, idleReader{resp.Body, idle, h.cfg.IdleTimeout})
	}
	if ct := resp.Header.Get("Content-Type"); !isEventStream(ct) {
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonContentType, "upstream_error",
			fmt.Sprintf("upstream answered %q, not an event stream", ct))
	}
	if !answer.Stop() {
		// The answer came as the timer fired: ctx is cancelled already.
		return refuse(w, http.StatusGatewayTimeout, OutcomeUpstreamError, reasonTimeout, "timeout",
			fmt.Sprintf("upstream did not answer within %s", h.cfg.UpstreamTimeout))
	}

	buf := readBuffers.Get().(*[readBufferSize]byte)
	defer readBuffers.Put(buf)
	body := &byteBudget{r: idleReader{resp.Body, idle, h.cfg.IdleTimeout}, left: lim.Bytes, max: lim.Bytes}
	rd := sse.NewReaderBuffer(body, buf[:], h.cfg.MaxLine)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.begin(h.cfg.NewTranscript(), req.choices)
	out := newFlusher(w, h.cfg.ClientWriteTimeout)
	out.http1 = r.ProtoMajor == 1
	defer out.done()
	// Before a read that may block, what is written must not wait on it,
	// nor what was forwarded go uncounted while it waits.
	dec := sse.NewDecoder(rd, h.cfg.MaxLine, func() error {
		s.acct.publish(h.cfg.Metrics)
		return out.flush()
	})
	err = s.forward(dec, out)
	s.acct.ignored(dec.Ignored())
	switch {
	case err == nil:
		keepConnection(resp, idle, h.cfg.drainWait)
		return result{outcome: OutcomeOK, status: http.StatusOK}
	case errors.Is(err, errClientGone) || r.Context().Err() != nil:
		return result{outcome: OutcomeClientCanceled, status: http.StatusOK, err: err.Error()}
	case errors.Is(err, errQuotaSpent):
		// The tenant's limit, not a failure of the service's: counted
		// as a rejection, as at admission.
		t := s.acct.tenant
		h.cfg.Metrics.rejections.WithLabelValues(t.Name, limitTokens).Inc()
		msg := fmt.Sprintf("tenant %s has spent its %d tokens per minute; the upstream streamed past the request's max_tokens", t.Name, t.TokensPerMinute)
		s.flushTail(out)
		out.line(errorEvent("rate_limit_error", msg))
		out.line(nil)
		out.flush()
		return result{outcome: OutcomeRejected, status: http.StatusOK, err: msg}
	}
	var limit limitError
	if errors.As(context.Cause(ctx), &limit) {
		err = limit // the read it cut says only "context canceled"
	}
	// What was accepted is not lost: release the held tails, then tell
	// the client why the stream ends without [DONE].
	s.flushTail(out)
	out.line(errorEvent("upstream_error", "stream from upstream ended: "+err.Error()))
	out.line(nil)
	out.flush()
	return result{outcome: OutcomeUpstreamError, status: http.StatusOK, reason: classifyReadError(err, context.Cause(ctx)), err: err.Error()}
}

// keepConnection reads the end of an upstream body after its [DONE], so
// the connection goes back to the transport's pool: Go's client closes an
// HTTP/1 connection whose body is closed before its end, and the next
// stream would dial another, at the cost of a connection's setup on both
// sides and on that stream's first token. An upstream ends its body right
// after [DONE] (the chunked encoding's last chunk follows at once); one
// that sends more than drainBytes, or has not ended its body within
// drainWait, has its connection closed, as before. The client has [DONE]
// already, but its response ends, and the stream's slot and duration with
// it, when the drain does: at most drainWait later. What the upstream
// sends after [DONE] is not the stream's, and is discarded. A connection
// that cannot be kept (the upstream said Connection: close) or needs no
// drain to be (HTTP/2, whose streams end on their own) is not waited for.
func keepConnection(resp *http.Response, idle *time.Timer, wait time.Duration) {
	if resp.Close || resp.ProtoMajor != 1 {
		return
	}
	idle.Reset(wait) // its cancel cuts the read
	_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	idle.Stop()
}

const (
	drainBytes = 4 << 10
	drainWait  = 20 * time.Millisecond
)

// isRedirect says whether status is one a client would follow (3xx with a
// Location; 304 answers a conditional request the gateway never makes, and
// is refused all the same).
func isRedirect(status int) bool { return status >= 300 && status < 400 }

// isEventStream says whether a Content-Type names text/event-stream. Media
// types are case-insensitive and may carry parameters (RFC 9110 §8.3.1),
// so the header is parsed, not compared as a prefix: "Text/Event-Stream;
// charset=utf-8" is one, "text/event-streamx" is not. A malformed
// parameter does not change what the type is.
func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) && mt == "text/event-stream"
}

// readBuffers keep the read buffers of streams that ended for the next: a
// 64 KiB buffer is a large object, and with the write buffer (flusher) one
// a stream was a tenth of the garbage the gateway made, the transcript
// the rest.
var readBuffers = sync.Pool{New: func() any { return new([readBufferSize]byte) }}

const readBufferSize = 64 << 10

func classifyReadError(err, cause error) string {
	var u unredactable
	switch {
	case errors.As(err, &u):
		return u.reason
	case errors.As(err, new(limitError)):
		return reasonStreamLimit
	case errors.Is(cause, errIdle):
		return reasonIdle
	case errors.Is(err, sse.ErrLineTooLong) || errors.Is(err, sse.ErrEventTooLong):
		return reasonLineTooLong
	case errors.Is(err, io.EOF):
		return reasonNoDone
	}
	return reasonReset
}

// requestErrors are the upstream answers that blame the request itself
// (an unknown model, a bad parameter): the client's mistake, passed back
// as it is and recorded as rejected, so it burns no availability budget —
// when the provider says so in its own error shape. A bare 404 is a wrong
// upstream URL, the service's problem, as is every other 4xx: 401/403 (the
// gateway's own upstream credentials), 408, 429 (the provider's capacity).
var requestErrors = map[int]bool{
	http.StatusBadRequest: true, http.StatusNotFound: true, http.StatusConflict: true,
	http.StatusRequestEntityTooLarge: true, http.StatusUnsupportedMediaType: true, http.StatusUnprocessableEntity: true,
}

// upstreamRefusal maps an upstream's non-200 answer to a client error: the
// client learns what the upstream said (the first 512 bytes of body, read
// from body, redacted as quotable says), and a 429 keeps its Retry-After.
// When the answer timer cut the read of the body (ctx's cause), the client
// learns that too.
func upstreamRefusal(ctx context.Context, w http.ResponseWriter, resp *http.Response, body io.Reader) result {
	snippet, err := io.ReadAll(io.LimitReader(body, 512))
	msg := fmt.Sprintf("upstream answered %s", resp.Status)
	if text := quotable(snippet); text != "" {
		msg += ": " + text
	}
	if err != nil && errors.Is(context.Cause(ctx), errNoAnswer) {
		msg += " (its body was cut: " + errNoAnswer.Error() + ")"
	}
	var shaped openai.Error
	isProviders := json.Unmarshal(snippet, &shaped) == nil && shaped.Error.Message != ""
	switch code := resp.StatusCode; {
	case requestErrors[code] && isProviders:
		return reject(w, code, "invalid_request_error", msg)
	case code == http.StatusTooManyRequests:
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		return refuse(w, http.StatusTooManyRequests, OutcomeUpstreamError, reason4xx, "rate_limit_error", msg)
	case code < 500:
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reason4xx, "upstream_error", msg)
	}
	return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reason5xx, "upstream_error", msg)
}

// quotable returns an upstream error body as the client may read it,
// redacted as the client will decode it. A JSON body (a provider's error
// shape) is decoded, every string in it (keys too) redacted, and encoded
// again without escapes the client would have to undo: "kim\u0040example
// \u002ecom" is an address once decoded, so it is redacted decoded. Text
// that is no JSON is redacted as it is, unless it holds a backslash, which
// a lenient reader would decode into text the redactor never saw: then it
// is withheld, as the stream path withholds such data (forwardText).
func quotable(snippet []byte) string {
	text := strings.TrimSpace(strings.ToValidUTF8(string(snippet), ""))
	if text == "" {
		return ""
	}
	var doc any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if dec.Decode(&doc) == nil && !dec.More() {
		var out strings.Builder
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if enc.Encode(redactJSON(doc)) == nil {
			return strings.TrimSpace(out.String())
		}
	}
	if strings.Contains(text, `\`) {
		return "(body withheld: it holds escapes the gateway cannot redact as a client would decode them)"
	}
	red, _ := redact.Text([]byte(text))
	return string(red)
}

// redactJSON returns a decoded JSON value with every string in it, keys
// included, redacted; a number that reads as PII (an error body is read by
// people) becomes the redaction's text.
func redactJSON(v any) any {
	redacted := func(s string) string {
		red, _ := redact.Text([]byte(s))
		return string(red)
	}
	switch v := v.(type) {
	case string:
		return redacted(v)
	case json.Number:
		if red := redacted(v.String()); red != v.String() {
			return red
		}
	case []any:
		for i := range v {
			v[i] = redactJSON(v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[redacted(k)] = redactJSON(e)
		}
		return out
	}
	return v
}

// idleReader bounds each read of the upstream body by the idle timeout:
// the timer is armed when a read starts and stopped when it returns, so it
// measures only the time the gateway waits on the upstream. The time it
// spends writing to a client that reads slowly is the client's
// back-pressure — the upstream's bytes wait in the socket meanwhile — and
// the client write timeout bounds it (flusher.flush), as client_canceled.
// A timer that ran between reads counted that wait as the upstream's
// silence and failed the stream as idle_timeout.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (ir idleReader) Read(p []byte) (int, error) {
	ir.timer.Reset(ir.d)
	n, err := ir.r.Read(p)
	ir.timer.Stop()
	return n, err
}
