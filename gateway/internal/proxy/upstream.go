package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

// proxy calls the upstream with an admitted request and, once it answers
// with an event stream, forwards it.
func (h *Handler) proxy(w http.ResponseWriter, r *http.Request, s *stream, req *admitted) result {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	upReq, err := http.NewRequestWithContext(ctx, http.MethodPost, h.endpoint, bytes.NewReader(req.body))
	if err != nil {
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonConnect, "upstream_error", err.Error())
	}
	upReq.Header.Set("Content-Type", "application/json")
	upReq.Header.Set("Accept", "text/event-stream")
	upReq.Header.Set("X-Request-Id", s.id)
	// The URL is the configured upstream's, never the client's: no SSRF.
	resp, err := h.cfg.Client.Do(upReq) //nolint:gosec // G704: see above
	if err != nil {
		var ne net.Error
		switch {
		case r.Context().Err() != nil:
			return gone("client went away before the upstream answered")
		case errors.As(err, &ne) && ne.Timeout():
			return refuse(w, http.StatusGatewayTimeout, OutcomeUpstreamError, reasonTimeout, "timeout",
				fmt.Sprintf("upstream did not answer within %s", h.cfg.UpstreamTimeout))
		}
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonConnect, "upstream_error", "upstream unreachable: "+err.Error())
	}
	defer resp.Body.Close()
	// Stopped until the first read arms it (idleReader): an error's body
	// is read under it too, so an upstream that answers 503 and stalls
	// does not hold the handler.
	idle := time.AfterFunc(h.cfg.IdleTimeout, func() { cancel(errIdle) })
	idle.Stop()
	defer idle.Stop()
	if resp.StatusCode != http.StatusOK {
		return upstreamRefusal(w, resp, idleReader{resp.Body, idle, h.cfg.IdleTimeout})
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return refuse(w, http.StatusBadGateway, OutcomeUpstreamError, reasonContentType, "upstream_error",
			fmt.Sprintf("upstream answered %q, not an event stream", ct))
	}

	buf := readBuffers.Get().(*[readBufferSize]byte)
	defer readBuffers.Put(buf)
	lim := h.cfg.Limits
	wall := time.AfterFunc(lim.Duration, func() { cancel(limitError{lim.Duration.String()}) })
	defer wall.Stop()
	body := &byteBudget{r: idleReader{resp.Body, idle, h.cfg.IdleTimeout}, left: lim.Bytes, max: lim.Bytes}
	rd := sse.NewReaderBuffer(body, buf[:], h.cfg.MaxLine)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.begin(h.cfg.NewTranscript(req.maxTokens), req.choices)
	out := newFlusher(w, h.cfg.ClientWriteTimeout)
	defer out.done()
	// Before a read that may block, what is written must not wait on it.
	dec := sse.NewDecoder(rd, h.cfg.MaxLine, out.flush)
	err = s.forward(dec, out)
	s.acct.ignored(dec.Ignored())
	switch {
	case err == nil:
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
// from body), and a 429 keeps its Retry-After.
func upstreamRefusal(w http.ResponseWriter, resp *http.Response, body io.Reader) result {
	snippet, _ := io.ReadAll(io.LimitReader(body, 512))
	msg := fmt.Sprintf("upstream answered %s", resp.Status)
	if text := strings.TrimSpace(strings.ToValidUTF8(string(snippet), "")); text != "" {
		redacted, _ := redact.Text([]byte(text))
		msg += ": " + string(redacted)
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
