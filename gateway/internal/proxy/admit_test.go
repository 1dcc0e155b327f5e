package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"burnlab/gateway/internal/tenant"
	"burnlab/shared/openai"
	"burnlab/shared/syncbuf"
)

// The auth scheme is case-insensitive (RFC 9110 §11.1): "bearer", "BEARER"
// and any run of spaces before the key are one scheme. Two Authorization
// headers are ambiguous — which one a proxy on the way, the gateway and a
// log agree on is anyone's guess — so they are refused, not resolved.
func TestAuthorizationSchemeIsCaseInsensitiveAndDuplicatesAreRefused(t *testing.T) {
	var called atomic.Int64
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		called.Add(1)
		sseUpstream("data: [DONE]", "")(w, r)
	})
	do := func(values ...string) (*http.Response, openai.Error, string) {
		req, _ := http.NewRequest(http.MethodPost, l.gw.URL+RouteStream, strings.NewReader(`{"stream":true}`))
		for _, v := range values {
			req.Header.Add("Authorization", v)
		}
		resp, err := l.gw.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e openai.Error
		if resp.StatusCode != 200 {
			json.Unmarshal(b, &e)
		}
		return resp, e, string(b)
	}
	for _, v := range []string{"Bearer k-acme", "bearer k-acme", "BEARER k-acme", "bEaReR   k-acme", "Bearer k-acme "} {
		if resp, _, raw := do(v); resp.StatusCode != 200 {
			t.Errorf("Authorization: %q: %d %s, want 200", v, resp.StatusCode, raw)
		}
	}
	for _, v := range []string{"Basic k-acme", "Bearerk-acme", "Bearer", "k-acme", "Bearer k-acme k-acme"} {
		if resp, e, raw := do(v); resp.StatusCode != 401 || e.Error.Type != "authentication_error" {
			t.Errorf("Authorization: %q: %d %s, want 401", v, resp.StatusCode, raw)
		}
	}
	before := called.Load()
	for _, pair := range [][]string{{"Bearer k-acme", "Bearer k-tiny"}, {"Bearer k-acme", "Bearer k-acme"}, {"Bearer nope", "Bearer k-acme"}} {
		resp, e, raw := do(pair...)
		if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "Authorization headers") {
			t.Errorf("two Authorization headers %q: %d %s, want 400 saying why", pair, resp.StatusCode, raw)
		}
	}
	if called.Load() != before {
		t.Error("a request with two Authorization headers reached the upstream")
	}
}

// UPSTREAM_URL takes the provider's base URL in either form people copy:
// http://host, or http://host/v1 as every OpenAI SDK spells it. The second
// made the gateway post to /v1/v1/chat/completions, which answers 404.
func TestUpstreamBaseURLWithOrWithoutV1(t *testing.T) {
	for _, c := range []struct{ base, want string }{
		{"", "/v1/chat/completions"},
		{"/", "/v1/chat/completions"},
		{"/v1", "/v1/chat/completions"},
		{"/v1/", "/v1/chat/completions"},
		{"/openai", "/openai/v1/chat/completions"},
		{"/openai/v1", "/openai/v1/chat/completions"},
	} {
		t.Run(c.base, func(t *testing.T) {
			var got atomic.Value
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				got.Store(r.URL.Path)
				sseUpstream(chunkLine("hi"), "", "data: [DONE]", "")(w, r)
			}, func(cfg *Config) {
				u := *cfg.Upstream
				u.Path = c.base
				cfg.Upstream = &u
			})
			resp, body := l.stream(t)
			if resp.StatusCode != 200 || got.Load() != c.want {
				t.Fatalf("base path %q: the upstream was asked for %v (want %s); the client got %d %.200s", c.base, got.Load(), c.want, resp.StatusCode, body)
			}
		})
	}
}

// A URL that is not a base URL is refused when the gateway starts, with
// the form to use, not answered 404 on every request.
func TestUpstreamURLInTheWrongFormIsRefusedAtStart(t *testing.T) {
	for raw, want := range map[string]string{
		"http://up:8081/v1/chat/completions":  "http://up:8081/v1",
		"http://up:8081/v1/chat/completions/": "http://up:8081/v1",
		"http://up:8081/chat/completions":     "http://up:8081",
		"up:8081":                             "http://host:port",
		"/v1":                                 "http://host:port",
		"ftp://up:8081":                       "http or https",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Endpoint(u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Endpoint(%q) = %v, want an error naming %q", raw, err, want)
		}
	}
}

// stalledClient is a ResponseWriter whose client has stopped reading: the
// stream's first write blocks until resume is closed. It has no write
// deadline (the client write timeout does not apply): the test is about
// which timer counts the wait, not about how long it may last.
type stalledClient struct {
	header  http.Header
	stalled chan struct{} // closed when the first write blocks
	resume  chan struct{}
	once    sync.Once
	body    syncbuf.Buffer
}

func newStalledClient() *stalledClient {
	return &stalledClient{header: http.Header{}, stalled: make(chan struct{}), resume: make(chan struct{})}
}

func (c *stalledClient) Header() http.Header { return c.header }
func (c *stalledClient) WriteHeader(int)     {}
func (c *stalledClient) Flush()              {}

func (c *stalledClient) Write(p []byte) (int, error) {
	c.once.Do(func() { close(c.stalled) })
	<-c.resume
	return c.body.Write(p)
}

func (c *stalledClient) String() string { return c.body.String() }

// A client that stops reading holds the gateway in a write, while the
// upstream has sent all it had: that is the client's back-pressure, ended
// (if ever) by the client write timeout as client_canceled. The idle timer
// ran through the write and cut the stream as the upstream's idle_timeout,
// which burns the availability SLO.
//
// The durations set an order, not a speed: the client pauses for ten idle
// timeouts while the gateway is blocked writing to it, so a timer that
// counts the write fires during the pause whatever the machine's pace,
// and the test sees the upstream's request canceled before it resumes the
// client. Every read after the pause finds its bytes already sent, so a
// timer that counts only reads cannot fire on a working upstream however
// slow the machine. An upstream that then really goes silent is still cut
// as idle_timeout.
func TestIdleTimeoutDoesNotCountTheClientsBackPressure(t *testing.T) {
	const idle = 100 * time.Millisecond
	for _, silent := range []bool{false, true} {
		t.Run(fmt.Sprintf("silent upstream after the pause=%v", silent), func(t *testing.T) {
			proceed, sent, canceled := make(chan struct{}), make(chan struct{}), make(chan struct{})
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, tok := range []string{"one ", "two ", "three"} {
					io.WriteString(w, chunkLine(tok)+"\n\n")
				}
				w.(http.Flusher).Flush()
				select {
				case <-proceed:
				case <-r.Context().Done():
					close(canceled)
					return
				}
				if !silent {
					io.WriteString(w, "data: [DONE]\n\n")
					w.(http.Flusher).Flush()
				}
				close(sent)
				<-r.Context().Done()
				close(canceled)
			}, func(c *Config) { c.IdleTimeout, c.ClientWriteTimeout = idle, time.Minute })
			h := l.gw.Config.Handler.(*Handler)
			client := newStalledClient()
			req := httptest.NewRequest(http.MethodPost, RouteStream, strings.NewReader(`{"stream":true}`))
			req.Header.Set("Authorization", "Bearer k-acme")
			served := make(chan struct{})
			go func() {
				defer close(served)
				h.ServeHTTP(client, req)
			}()
			<-client.stalled
			select {
			case <-canceled:
				close(client.resume)
				<-served
				t.Fatalf("the upstream's request was canceled while only the client was slow: %s", l.logs)
			case <-time.After(10 * idle):
			}
			close(proceed)
			<-sent
			close(client.resume)
			<-served
			text, done, errs := contents(t, client.String())
			if text != "one two three" {
				t.Errorf("client got %q, want every event the upstream sent", text)
			}
			if silent {
				if done || len(errs) != 1 || l.reason(reasonIdle) != 1 {
					t.Fatalf("an upstream silent after the pause: done=%v errors=%v idle_timeout=%v, want it cut as idle_timeout", done, errs, l.reason(reasonIdle))
				}
				return
			}
			if !done || len(errs) > 0 || l.reason(reasonIdle) != 0 || l.outcomes(t, OutcomeOK) != 1 {
				t.Fatalf("done=%v errors=%v idle_timeout=%v ok=%d, want the stream to finish ok: %s", done, errs, l.reason(reasonIdle), l.outcomes(t, OutcomeOK), l.logs)
			}
		})
	}
}

// provider stands in for the model provider: it streams exactly a
// request's max_tokens tokens (" t0", " t1", …), one an event, or n when
// n > 0, whatever the request asks (an upstream that ignores max_tokens).
// Each stream sends its first token, then waits for hold to be closed
// before the rest, so streams admitted together are in flight together.
func provider(n int, hold <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if n > 0 {
			req.MaxTokens = n
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range req.MaxTokens {
			io.WriteString(w, chunkLine(fmt.Sprintf(" t%d", i))+"\n\n")
			if i == 0 {
				w.(http.Flusher).Flush()
				select {
				case <-hold:
				case <-r.Context().Done():
					return
				}
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

// withTenants replaces the lab's tenants.
func withTenants(t *testing.T, spec string) func(*Config) {
	reg, err := tenant.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.Tenants = reg }
}

// tokensIn counts the tokens a client assembled from a provider stream.
func tokensIn(t *testing.T, body string) int {
	text, _, _ := contents(t, body)
	return len(strings.Fields(text))
}

// Tokens were charged only as they streamed, and admission needed only a
// positive balance, so simultaneous requests were all admitted on a
// balance each of them would spend: 50 requests of max_tokens 200 for a
// tenant allowed 2 tokens a minute got 28–50 admitted and 5,600–9,800
// tokens. Each now reserves its max_tokens before it starts.
//
// The 50 requests are in flight together: every admitted stream holds
// after its first token until all 50 have been answered. What the
// tenant streamed must stay within its quota for the time the test took
// (a minute's worth plus the refill) plus one request's worth, and no
// refusal may ask a client to wait more than a minute.
func TestQuotaHoldsUnderConcurrency(t *testing.T) {
	for _, c := range []struct {
		tpm      int
		refusals int // the status of a request that asks for more than the whole quota, or 429
	}{{2, http.StatusBadRequest}, {1000, http.StatusTooManyRequests}} {
		t.Run(fmt.Sprintf("%d tokens a minute", c.tpm), func(t *testing.T) {
			const requests, maxTokens = 50, 200
			hold := make(chan struct{})
			l := newLab(t, provider(0, hold), withTenants(t, fmt.Sprintf("k=ten:%d", c.tpm)))
			var answered, finished sync.WaitGroup
			var mu sync.Mutex
			admitted, streamed, statuses := 0, 0, map[int]int{}
			var refusals []string
			begin := time.Now()
			for range requests {
				answered.Add(1)
				finished.Go(func() {
					req, _ := http.NewRequest(http.MethodPost, l.gw.URL+RouteStream, strings.NewReader(fmt.Sprintf(`{"stream":true,"max_tokens":%d}`, maxTokens)))
					req.Header.Set("Authorization", "Bearer k")
					resp, err := l.gw.Client().Do(req)
					answered.Done()
					if err != nil {
						t.Error(err)
						return
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					mu.Lock()
					defer mu.Unlock()
					statuses[resp.StatusCode]++
					if resp.StatusCode == 200 {
						admitted++
						streamed += tokensIn(t, string(b))
						return
					}
					refusals = append(refusals, resp.Header.Get("Retry-After")+" "+string(b))
				})
			}
			answered.Wait()
			close(hold)
			finished.Wait()
			elapsed := time.Since(begin)
			quota := float64(c.tpm) * (1 + elapsed.Minutes())
			t.Logf("%d requests of max_tokens %d at once: statuses %v, %d admitted, %d tokens streamed in %s (quota for that time %.0f)",
				requests, maxTokens, statuses, admitted, streamed, elapsed.Round(time.Millisecond), quota)
			if float64(streamed) > quota+maxTokens || float64(admitted*maxTokens) > quota {
				t.Errorf("%d admitted streamed %d tokens: over the quota for %s (%.0f) plus one request's worth", admitted, streamed, elapsed.Round(time.Millisecond), quota)
			}
			if statuses[200]+statuses[c.refusals] != requests {
				t.Errorf("statuses %v: want 200s and %ds only", statuses, c.refusals)
			}
			for _, r := range refusals {
				if !strings.Contains(r, "ten") {
					t.Errorf("a refusal that does not say why: %s", r)
				}
			}
			// After them, the tenant waits at most a minute.
			resp := l.post(t, "k", `{"stream":true,"max_tokens":1}`)
			io.ReadAll(resp.Body)
			if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode == 429 && (err != nil || ra < 1 || ra > 60) {
				t.Errorf("the next request: 429 with Retry-After %q, want 1–60 s", resp.Header.Get("Retry-After"))
			}
		})
	}
}

// What a stream reserved and did not stream goes back when it ends: a
// tenant whose requests ask for more than they use is not held to what
// they asked.
func TestUnusedReservationsAreGivenBack(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	l := newLab(t, provider(10, closed), withTenants(t, "k=ten:1000"))
	for i := range 5 {
		resp := l.post(t, "k", `{"stream":true,"max_tokens":500}`)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || tokensIn(t, string(b)) != 10 {
			t.Fatalf("request %d of 500 tokens, using 10, of a 1000-token quota: %d %.200s", i+1, resp.StatusCode, b)
		}
	}
	// 50 used of 1000: a reservation of 950 still fits.
	resp := l.post(t, "k", `{"stream":true,"max_tokens":950}`)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("after 50 tokens streamed of 1000: %d %.200s", resp.StatusCode, b)
	}
}

// An upstream that ignores max_tokens streamed 10,000 tokens on a
// 60-token quota, and the debt locked the tenant out for 9,941 s (the
// issue's 50 streams: 167,970 s). The overrun is charged as far as the
// balance goes and never becomes a debt, so the tenant waits a minute at
// most; the same for a request with no max_tokens, which reserves the
// default and draws the rest on the balance.
func TestAnOverrunNeverLocksATenantOutForLongerThanAMinute(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	for _, body := range []string{`{"stream":true,"max_tokens":60}`, `{"stream":true}`} {
		t.Run(body, func(t *testing.T) {
			l := newLab(t, provider(10000, closed))
			first := l.post(t, "k-tiny", body)
			io.ReadAll(first.Body)
			if first.StatusCode != 200 {
				t.Fatalf("first stream: %d", first.StatusCode)
			}
			second := l.post(t, "k-tiny", `{"stream":true,"max_tokens":1}`)
			io.ReadAll(second.Body)
			ra, err := strconv.Atoi(second.Header.Get("Retry-After"))
			if second.StatusCode != 429 || err != nil || ra < 1 || ra > 60 {
				t.Fatalf("after the overrun: %d, Retry-After %q; want 429 and 1–60 s", second.StatusCode, second.Header.Get("Retry-After"))
			}
			// The first stream, stopped when the balance ran out, and this one.
			if n := testutil.ToFloat64(l.m.rejections.WithLabelValues("tiny", limitTokens)); n != 2 {
				t.Errorf("quota rejections = %v, want 2", n)
			}
		})
	}
}

// The token limit a request sets is checked, counted per choice, and
// refused with a 400 that says what to ask for when it is more than the
// tenant's whole quota: no retry could ever admit it, so not a 429, which
// SDKs retry.
func TestTokenLimitsAreCheckedAndReservedPerChoice(t *testing.T) {
	called := false
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) { called = true }, withTenants(t, "k=ten:1000"))
	for body, want := range map[string]string{
		`{"stream":true,"max_tokens":0}`:                               "positive integer",
		`{"stream":true,"max_tokens":-5}`:                              "positive integer",
		`{"stream":true,"max_completion_tokens":0}`:                    "positive integer",
		`{"stream":true,"max_tokens":1001}`:                            "ask for at most 1000 per choice",
		`{"stream":true,"max_tokens":600,"n":2}`:                       "ask for at most 500 per choice",
		`{"stream":true,"max_tokens":10,"max_completion_tokens":2000}`: "2000 tokens",
		`{"stream":true,"max_tokens":9223372036854775807,"n":8}`:       "ask for at most 125 per choice",
	} {
		resp := l.post(t, "k", body)
		var e openai.Error
		raw := readJSON(t, resp.Body, &e)
		if resp.StatusCode != 400 || !strings.Contains(e.Error.Message, want) || resp.Header.Get("Retry-After") != "" {
			t.Errorf("%s: %d %s, want 400 saying %q", body, resp.StatusCode, raw, want)
		}
	}
	if called {
		t.Error("a refused request reached the upstream")
	}
	if n := testutil.ToFloat64(l.m.rejections.WithLabelValues("ten", limitTokens)); n != 4 {
		t.Errorf("quota rejections = %v, want the 4 too large for the quota", n)
	}
}

// An upstream that ignores max_tokens is stopped when the tenant's balance
// cannot cover more: the client gets what the quota paid for, then a
// rate_limit_error event and no [DONE]; the stream counts as the tenant's
// rejection, not the service's failure.
func TestAStreamPastTheQuotaEnds(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	l := newLab(t, provider(10000, closed))
	resp := l.post(t, "k-tiny", `{"stream":true,"max_tokens":60}`)
	b, _ := io.ReadAll(resp.Body)
	_, done, errs := contents(t, string(b))
	got := tokensIn(t, string(b))
	// 60 reserved, what refills (1 a second) while it streams, and the
	// one event the check comes after.
	if resp.StatusCode != 200 || done || len(errs) != 1 || !strings.Contains(errs[0], "spent its 60 tokens per minute") || got > 70 {
		t.Fatalf("status %d, done=%v, errors %q, %d tokens; want at most ~60 tokens and one rate-limit error", resp.StatusCode, done, errs, got)
	}
	if l.outcomes(t, OutcomeRejected) != 1 || l.outcomes(t, OutcomeUpstreamError) != 0 {
		t.Errorf("outcome: rejected %d, upstream_error %d; want 1 and 0", l.outcomes(t, OutcomeRejected), l.outcomes(t, OutcomeUpstreamError))
	}
	if n := testutil.ToFloat64(l.m.rejections.WithLabelValues("tiny", limitTokens)); n != 1 {
		t.Errorf("quota rejections = %v, want 1", n)
	}
}
