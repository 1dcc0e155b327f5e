package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"burnlab/shared/openai"
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
	mu      sync.Mutex
	body    bytes.Buffer
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
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body.Write(p)
}

func (c *stalledClient) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body.String()
}

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
