package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"burnlab/shared/openai"
)

// An upstream that redirects must not make the gateway re-send the user's
// prompt elsewhere: Go's client follows 307 and 308 with the body.
func TestUpstreamRedirectsAreNeverFollowed(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			var elsewhere atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				sseUpstream(chunkLine("from elsewhere"), "", "data: [DONE]", "")(w, r)
			}))
			t.Cleanup(other.Close)
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/steal", code)
			})
			resp, body := l.stream(t)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "redirect") {
				t.Fatalf("client got %d %s, want 502 naming the redirect", resp.StatusCode, body)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests", n)
			}
			if l.reason(reasonRedirect) != 1 || l.outcomes(t, OutcomeUpstreamError) != 1 {
				t.Errorf("redirects counted %v, upstream errors %d: want 1 and 1", l.reason(reasonRedirect), l.outcomes(t, OutcomeUpstreamError))
			}
		})
	}
}

// Media types are case-insensitive and take parameters (RFC 9110 §8.3.1);
// a longer type that starts the same is another type.
func TestEventStreamMediaTypeIsParsed(t *testing.T) {
	for _, c := range []struct {
		contentType string
		ok          bool
	}{
		{"text/event-stream", true},
		{"Text/Event-Stream; charset=utf-8", true},
		{"TEXT/EVENT-STREAM;charset=UTF-8", true},
		{"text/event-streamx", false},
		{"text/event-stream-foo; x=y", false},
		{"text/plain", false},
		{"", false},
	} {
		t.Run(c.contentType, func(t *testing.T) {
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				io.WriteString(w, chunkLine("hello")+"\n\ndata: [DONE]\n\n")
			})
			resp, body := l.stream(t)
			text, done, _ := contents(t, body)
			if c.ok != (resp.StatusCode == http.StatusOK && done && text == "hello") {
				t.Errorf("Content-Type %q: client got %d %q, want streamed: %v", c.contentType, resp.StatusCode, body, c.ok)
			}
			if want := map[bool]float64{true: 0, false: 1}[c.ok]; l.reason(reasonContentType) != want {
				t.Errorf("content_type errors %v, want %v", l.reason(reasonContentType), want)
			}
		})
	}
}

// The upstream's error message reaches the client as the client decodes
// it: escapes in a JSON error body must not carry PII past the redactor.
func TestUpstreamErrorBodiesAreRedactedAsDecoded(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"escaped JSON", `{"error":{"message":"ask kim\u0040example\u002ecom or call \u0034155550199"}}`},
		{"escaped key", `{"kim\u0040example.com":"x","n":4155550199}`},
		{"escapes in plain text", `ask kim\u0040example\u002ecom or call \u0034155550199`},
		{"plain text", `ask kim@example.com or call 4155550199`},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, c.body, http.StatusServiceUnavailable)
			})
			resp := l.post(t, "k-acme", `{"stream":true}`)
			var e openai.Error
			raw := readJSON(t, resp.Body, &e)
			msg := e.Error.Message
			// What a reader gets who decodes the quoted body once more.
			var again any
			if _, body, ok := strings.Cut(msg, ": "); ok && json.Unmarshal([]byte(body), &again) == nil {
				b, _ := json.Marshal(again)
				msg += string(b)
			}
			msg = strings.NewReplacer(`\u0040`, "@", `\u002e`, ".", `\u0034`, "4").Replace(msg)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(msg, "503") {
				t.Fatalf("client got %d %s", resp.StatusCode, raw)
			}
			for _, leak := range []string{"kim@example.com", "4155550199"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%q reached the client: %s", leak, raw)
				}
			}
		})
	}
}

// An upstream that refuses and then drips its error body holds the client
// with no response headers: the exchange is bounded from the request on,
// not by the idle timer, which every byte restarts.
func TestAnErrorBodyThatDripsIsCut(t *testing.T) {
	upstreamDone := make(chan struct{})
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(upstreamDone)
		w.WriteHeader(http.StatusServiceUnavailable)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
				w.Write([]byte("x"))
				w.(http.Flusher).Flush()
			}
		}
	}, func(c *Config) { c.UpstreamTimeout = 300 * time.Millisecond })
	resp := l.post(t, "k-acme", `{"stream":true}`)
	var e openai.Error
	raw := readJSON(t, resp.Body, &e)
	// Dripped for 512 bytes, the answer would take 10 s and say nothing
	// of a cut; the idle timer (2 s) never fires between bytes.
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(e.Error.Message, "its body was cut") {
		t.Fatalf("client got %d %s, want 502 saying the body was cut", resp.StatusCode, raw)
	}
	<-upstreamDone // the upstream request was cancelled, not left dripping
	if l.reason(reason5xx) != 1 {
		t.Errorf("5xx counted %v, want 1", l.reason(reason5xx))
	}
	if n := testutil.ToFloat64(l.m.inFlight); n != 0 {
		t.Errorf("%v streams still in flight", n)
	}
}

// accumulated joins what a client's SDK joins across a stream's chunks, as
// openai-python's accumulate_delta does: every string of a choice's delta
// but "type", per choice, tool call and member path.
func accumulated(t *testing.T, body string) map[string]string {
	t.Helper()
	acc := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case string:
			acc[path] += v
		case map[string]any:
			for k, e := range v {
				if k != "type" && k != "index" {
					walk(path+"."+strings.ToLower(k), e)
				}
			}
		case []any:
			for i, e := range v {
				at := float64(i)
				if m, ok := e.(map[string]any); ok {
					if n, ok := m["index"].(float64); ok {
						at = n
					}
				}
				walk(fmt.Sprintf("%s[%v]", path, at), e)
			}
		}
	}
	events, _ := clientView(t, body)
	for _, ev := range events {
		var c struct{ Choices []any }
		if json.Unmarshal([]byte(ev.data), &c) == nil {
			walk("choices", c.Choices)
		}
	}
	return acc
}

// A client joins a tool call's name and id, the role and any other string
// of a delta across chunks, not only its content: PII split across two
// chunks of one of them reads whole once joined. Each goes out whole, so a
// piece that completes PII begun in an earlier one ends the stream.
func TestPIISplitAcrossAnyJoinedStringIsCaught(t *testing.T) {
	first := `{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]}}]}`
	for _, c := range []struct{ name, second string }{
		{"role", `{"choices":[{"index":0,"delta":{"role":"kim@exa"}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"role":"mple.com now"}}]}`},
		{"tool id", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"kim@exa"}]}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"mple.com"}]}}]}`},
		{"tool name", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"kim@exa"}}]}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"mple.com"}}]}}]}`},
		{"a provider's member", `{"choices":[{"index":0,"delta":{"x_note":"call 415"}}]}` + "\n\n" + `data: {"choices":[{"index":0,"delta":{"x_note":"555 0199 now"}}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := "data: " + first + "\n\ndata: " + c.second + "\n\ndata: [DONE]\n\n"
			l := newLab(t, rawUpstream(body))
			_, got := l.stream(t)
			for path, text := range accumulated(t, got) {
				if strings.Contains(text, "kim@example.com") || strings.Contains(text, "555 0199") {
					t.Errorf("%s joined to %q: PII reached the client", path, text)
				}
			}
			if _, done, errs := contents(t, got); done || len(errs) != 1 || l.reason(reasonUnredactable) != 1 {
				t.Errorf("want the stream ended, unredactable: done %v, errors %v\n%s", done, errs, got)
			}
		})
	}
}

// A role, a tool call's id, type and name reach the client in the chunk
// they came in, as they came: never held back, so a client that reads
// them from the first delta has them.
func TestJoinedValuesGoOutWhole(t *testing.T) {
	first := `{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`
	l := newLab(t, rawUpstream("data: "+first+"\n\ndata: "+rawChunk("hi")+"\n\ndata: [DONE]\n\n"))
	_, got := l.stream(t)
	events, _ := clientView(t, got)
	if len(events) == 0 || events[0].data != first {
		t.Fatalf("the first event is %+v, want the chunk as it came:\n%s", events, got)
	}
	if n := l.outcomes(t, OutcomeOK); n != 1 {
		t.Errorf("the stream is ok: %d\n%s", n, got)
	}
}

// A number where the schema has a string is refused, not passed: a client
// that joins text += delta.content shows it as text.
func TestNumbersWhereTextBelongsEndTheStream(t *testing.T) {
	for _, payload := range []string{
		`{"choices":[{"index":0,"delta":{"content":4111111111111111}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":4155550199}}]}}]}`,
	} {
		l := newLab(t, rawUpstream("data: "+rawChunk("hi")+"\n\ndata: "+payload+"\n\ndata: [DONE]\n\n"))
		_, got := l.stream(t)
		text, done, errs := contents(t, got)
		if strings.Contains(got, "4111111111111111") || strings.Contains(got, "4155550199") || done || len(errs) != 1 || text != "hi" {
			t.Errorf("%s: client text %q, done %v, errors %v\n%s", payload, text, done, errs, got)
		}
		if l.reason(reasonUnredactable) != 1 {
			t.Errorf("unredactable chunks %v, want 1", l.reason(reasonUnredactable))
		}
	}
}
