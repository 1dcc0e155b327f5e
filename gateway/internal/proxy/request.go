package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"burnlab/gateway/internal/tenant"
	"burnlab/shared/bearer"
)

// admitted is a request the gateway will stream: its body, forwarded to the
// upstream as the client sent it, its number of choices, and release, which
// ends its tenant reservation.
type admitted struct {
	body    []byte
	choices int
	release func()
}

// chatRequest holds the few fields the gateway reads.
type chatRequest struct {
	Stream              *bool           `json:"stream"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   int             `json:"n"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         int             `json:"top_logprobs"`
	Audio               json.RawMessage `json:"audio"`
	Modalities          []string        `json:"modalities"`
}

// DefaultMaxTokens is what a request that sets no token limit reserves per
// choice, at most its tenant's whole quota. It only sizes the reservation:
// such a stream draws what it streams past it on its tenant's balance like
// any other (tenant.Reservation.Cover).
const DefaultMaxTokens = 1024

// tokenLimit returns the most tokens the request lets a choice stream: its
// max_completion_tokens (OpenAI's newer name) or max_tokens, the larger
// when it sets both since an upstream may honour either, or 0 when it sets
// neither; or why the limit it sets is not one.
func (c chatRequest) tokenLimit() (int, string) {
	limit := 0
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", c.MaxTokens}, {"max_completion_tokens", c.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return 0, fmt.Sprintf(`"%s": %d: a token limit must be a positive integer`, f.name, *f.v)
		}
		limit = max(limit, *f.v)
	}
	return limit, ""
}

// reservation is what a request reserves of tenant t's quota: its token
// limit for each of its choices, or DefaultMaxTokens for each when it sets
// none, then at most t's whole quota, since a reservation must fit in the
// balance. A limit the request set is not cut to fit: the stream would end
// short of what the client asked for, so a request past the quota is
// refused instead (tenant.ErrTooLarge), saying what to ask for.
func (c chatRequest) reservation(limit int, t *tenant.Tenant) int {
	choices := max(c.N, 1)
	if limit == 0 {
		return min(DefaultMaxTokens*choices, t.TokensPerMinute)
	}
	if limit > math.MaxInt/choices {
		return math.MaxInt
	}
	return limit * choices
}

// MaxChoices bounds n: every choice's texts are redacted each with their own
// hold-back state, and a response may open at most maxTextStreams of them.
const MaxChoices = 8

// unredactable says why a request would make the upstream answer with text
// the gateway cannot redact, or "": log probabilities repeat every token
// (as strings and as byte arrays), and audio carries its words in sound.
func (c chatRequest) unredactable() string {
	switch {
	case c.N > MaxChoices:
		return fmt.Sprintf(`"n": %d: this gateway streams at most %d choices, each redacted on its own`, c.N, MaxChoices)
	case c.Logprobs || c.TopLogprobs > 0:
		return `"logprobs" and "top_logprobs" are refused: they repeat every token, bytes included, where the gateway cannot redact them`
	case len(c.Audio) > 0 && string(c.Audio) != "null" || slices.Contains(c.Modalities, "audio"):
		return "audio output is refused: the gateway cannot redact speech"
	}
	return ""
}

// admit checks the request and its tenant, in order of cost: method, key,
// body, then the tenant's limits. A request that is not admitted has been
// answered, and its result says how.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, s *stream) (*admitted, result) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, reject(w, http.StatusMethodNotAllowed, "invalid_request_error", "use POST for "+s.route)
	}
	auth := r.Header.Values("Authorization")
	if len(auth) > 1 {
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("%d Authorization headers: send exactly one, Authorization: Bearer <key>", len(auth)))
	}
	t, err := h.cfg.Tenants.Authenticate(bearer.Token(auth))
	if err != nil {
		return nil, reject(w, http.StatusUnauthorized, "authentication_error", "missing or unknown API key: send Authorization: Bearer <key>")
	}
	s.acct.tenant = t
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return nil, reject(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("request body over %d bytes", tooBig.Limit))
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The server's read deadline: a client trickling its body
			// must not hold a handler.
			return nil, reject(w, http.StatusRequestTimeout, "invalid_request_error", "request body did not arrive within the read timeout")
		}
		if r.Context().Err() != nil {
			return nil, gone("reading request: " + err.Error())
		}
		// A body that is not well formed (a broken chunked encoding): the
		// client is still there and must hear why, not get an empty 200.
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error", "reading the request body: "+err.Error())
	}
	// The read deadline covered the request; a stream lasts longer, and
	// a deadline left on the connection would cancel it when it fires.
	if err := http.NewResponseController(w).SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, gone("lifting the read deadline: " + err.Error())
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error", "request body is not a JSON chat request: "+err.Error())
	}
	if req.Stream == nil || !*req.Stream {
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error", `this gateway only streams: set "stream": true`)
	}
	if why := req.unredactable(); why != "" {
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error", why)
	}
	limit, why := req.tokenLimit()
	if why != "" {
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error", why)
	}
	tokens := req.reservation(limit, t)
	hold, wait, err := h.cfg.Tenants.Reserve(t, tokens)
	switch {
	case errors.Is(err, tenant.ErrTooLarge):
		// No retry can succeed, so not a 429 (SDKs retry those).
		h.cfg.Metrics.rejections.WithLabelValues(t.Name, limitTokens).Inc()
		return nil, reject(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(
			"this request may stream %d tokens (its token limit × n), more than tenant %s's whole quota of %d a minute: ask for at most %d per choice",
			tokens, t.Name, t.TokensPerMinute, t.TokensPerMinute/max(req.N, 1)))
	case err != nil:
		limit, msg := limitTokens, fmt.Sprintf("tenant %s's tokens-per-minute quota (%d) cannot cover this request's %d tokens yet", t.Name, t.TokensPerMinute, tokens)
		if errors.Is(err, tenant.ErrTooManyStreams) {
			limit, msg = limitStreams, fmt.Sprintf("tenant %s already has %d streams in flight, its limit", t.Name, t.MaxStreams)
		}
		h.cfg.Metrics.rejections.WithLabelValues(t.Name, limit).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		return nil, reject(w, http.StatusTooManyRequests, "rate_limit_error", msg)
	}
	s.acct.hold = hold
	return &admitted{body: body, choices: max(req.N, 1), release: func() { hold.End(s.acct.tokens) }}, result{}
}

// requestID keeps a client's X-Request-Id when it is a short token, so a
// request can be followed through the client's logs and the upstream's.
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
