package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

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
