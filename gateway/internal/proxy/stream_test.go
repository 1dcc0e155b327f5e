package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"burnlab/shared/openai"
)

func TestForwardsAStreamAndCountsIt(t *testing.T) {
	var lines []string
	want := ""
	for i := range 200 {
		tok := " word" + strings.Repeat("x", i%7)
		want += tok
		lines = append(lines, chunkLine(tok), "")
	}
	lines = append(lines, "data: [DONE]", "")
	l := newLab(t, sseUpstream(lines...))
	resp, body := l.stream(t)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text, done, errs := contents(t, body)
	if text != want || !done || len(errs) > 0 {
		t.Fatalf("client got %d bytes of text (want %d), done=%v, errors %v", len(text), len(want), done, errs)
	}
	if n := testutil.ToFloat64(l.m.tokens.WithLabelValues("acme")); n != 200 {
		t.Errorf("gateway_tokens_total{tenant=acme} = %v, want 200", n)
	}
	if got := l.outcomes(t, OutcomeOK); got != 1 {
		t.Errorf("ok streams = %d, want 1", got)
	}
	if !strings.Contains(l.logs.String(), `"outcome":"ok"`) || strings.Contains(l.logs.String(), "wordx") {
		t.Errorf("log line must carry the outcome and no content: %s", l.logs.String())
	}
	// The transcript saw every data event the client saw (the 200, and the
	// released redaction tail).
	sent, kept := strings.Count(body, "chat.completion.chunk"), strings.Count(l.trs[0].text(), "chat.completion.chunk")
	if sent < 200 || kept != sent {
		t.Errorf("transcript holds %d chunks, client saw %d", kept, sent)
	}
}

func TestRedactsPIISplitAcrossEvents(t *testing.T) {
	l := newLab(t, sseUpstream(
		chunkLine("Mail jane.do"), "", chunkLine("e@example.com, call +1 (555) 12"), "",
		chunkLine("3-4567, card 4111 1111 "), "", chunkLine("1111 1111 and key sk-abcdefghij"), "",
		chunkLine("klmnopqrstuvwxyz"), "", "data: [DONE]", ""))
	_, body := l.stream(t)
	text, done, _ := contents(t, body)
	want := "Mail [REDACTED:EMAIL], call [REDACTED:PHONE], card [REDACTED:CARD] and key [REDACTED:API_KEY]"
	if text != want || !done {
		t.Fatalf("client got %q (done=%v)\nwant %q", text, done, want)
	}
	for _, leak := range []string{"jane", "4567", "4111", "sk-abc", "wxyz"} {
		if strings.Contains(body, leak) {
			t.Errorf("%q leaked to the client", leak)
		}
	}
	if n := testutil.ToFloat64(l.m.redactions.WithLabelValues("card")); n != 1 {
		t.Errorf("card redactions = %v", n)
	}
}

func TestRejectsBeforeCallingTheUpstream(t *testing.T) {
	called := false
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) { called = true })
	cases := []struct {
		name, key, body string
		status          int
		kind            string
	}{
		{"no key", "", `{"stream":true}`, 401, "authentication_error"},
		{"unknown key", "nope", `{"stream":true}`, 401, "authentication_error"},
		{"not JSON", "k-acme", `{"stream":`, 400, "invalid_request_error"},
		{"not streaming", "k-acme", `{"stream":false}`, 400, "invalid_request_error"},
		{"too big", "k-acme", `{"stream":true,"x":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "invalid_request_error"},
	}
	for _, c := range cases {
		resp := l.post(t, c.key, c.body)
		var e openai.Error
		raw := readJSON(t, resp.Body, &e)
		if resp.StatusCode != c.status || e.Error.Type != c.kind || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, raw, c.status, c.kind)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, l.gw.URL+RouteStream, nil)
	resp, err := l.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if called {
		t.Error("a rejected request reached the upstream")
	}
	if got := l.outcomes(t, OutcomeRejected); got != len(cases)+1 {
		t.Errorf("rejected streams = %d, want %d", got, len(cases)+1)
	}
}

func TestRepairsOddLinesAndKeepsGoing(t *testing.T) {
	l := newLab(t, sseUpstream(
		": keep-alive", "event: message", "id: 7", "retry: 1000",
		"garbage without a colon", "weird: field",
		strings.Replace(chunkLine("crlf "), "}", "}", 1)+"\r", "\r",
		`data: {"choices":[{"delta":{"content":"bad `+"\xff\xfe"+` utf8 "}}]}`, "",
		`data: {not json at all, mail bob@example.com}`, "",
		`data: {"choices":[{"delta":{"role":"assistant"}}]}`, "",
		chunkLine("end"), "", "data: [DONE]", ""))
	_, body := l.stream(t)
	// The comment goes on as a keep-alive without its text.
	for _, want := range []string{":\n", "event: message\n", "id: 7\n", "retry: 1000\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("SSE field %q not forwarded", want)
		}
	}
	if strings.Contains(body, "keep-alive") {
		t.Errorf("a comment's text was forwarded:\n%s", body)
	}
	if strings.Contains(body, "garbage") || strings.Contains(body, "weird") || strings.Contains(body, "\r") {
		t.Errorf("malformed lines or CRs forwarded:\n%s", body)
	}
	if strings.Contains(body, "bob@") || !strings.Contains(body, "[REDACTED:EMAIL]") {
		t.Errorf("PII inside an unparsable payload must still be redacted:\n%s", body)
	}
	if text, _, _ := contents(t, body); text != "crlf bad \ufffd utf8 end" {
		t.Errorf("client text %q: invalid UTF-8 must become U+FFFD and nothing else change", text)
	}
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream did not finish:\n%s", body)
	}
	for reason, want := range map[string]float64{reasonMalformed: 2, reasonInvalidUTF8: 1, reasonInvalidJSON: 1} {
		if got := l.reason(reason); got != want {
			t.Errorf("upstream errors %s = %v, want %v", reason, got, want)
		}
	}
	if l.outcomes(t, OutcomeOK) != 1 {
		t.Error("a repaired stream is still ok")
	}
}

func TestUpstreamFailuresEndWithAClearError(t *testing.T) {
	huge := "data: " + strings.Repeat("x", 1<<20+10)
	cases := []struct {
		name     string
		upstream http.HandlerFunc
		status   int
		reason   string
		midway   bool
	}{
		{"EOF without [DONE]", sseUpstream(chunkLine("half"), ""), 200, reasonNoDone, true},
		{"line over 1 MiB", sseUpstream(chunkLine("a"), "", huge), 200, reasonLineTooLong, true},
		{"4xx", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad upstream credentials", 403) }, 502, reason4xx, false},
		{"5xx", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "overloaded", 503) }, 502, reason5xx, false},
		{"not SSE", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"choices":[]}`)) }, 502, reasonContentType, false},
		{"reset mid-stream", resetAfter(chunkLine("partial bob@exam") + "\n\n"), 200, reasonReset, true},
		{"reset after an address", resetAfter(chunkLine("mail bob@example.com") + "\n\n"), 200, reasonReset, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, c.upstream)
			resp, body := l.stream(t)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.midway {
				_, done, errs := contents(t, body)
				if done || len(errs) != 1 {
					t.Fatalf("want one error event and no [DONE], got done=%v errors=%v\n%.300s", done, errs, body)
				}
			} else if !strings.Contains(body, `"type":"upstream_error"`) {
				t.Fatalf("body %s", body)
			}
			// The held tail is released, not lost: a complete address in it
			// is redacted, an address cut off by the reset never became one.
			text, _, _ := contents(t, body)
			if strings.Contains(text, "bob@example.com") || strings.Contains(text, "partial") && text != "partial bob@exam" {
				t.Errorf("client text %q", text)
			}
			if got := l.reason(c.reason); got != 1 {
				t.Errorf("upstream errors %s = %v, want 1", c.reason, got)
			}
			if l.outcomes(t, OutcomeUpstreamError) != 1 {
				t.Error("outcome is not upstream_error")
			}
		})
	}
}

// resetAfter writes prefix, then aborts the TCP connection with a RST.
func resetAfter(prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, prefix)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
}

func TestUpstreamThatNeverAnswersGets504(t *testing.T) {
	release := make(chan struct{})
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, func(c *Config) { c.UpstreamTimeout = 200 * time.Millisecond })
	defer close(release)
	resp, body := l.stream(t)
	if resp.StatusCode != 504 || !strings.Contains(body, `"type":"timeout"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if l.reason(reasonTimeout) != 1 {
		t.Error("timeout not counted")
	}
}

func TestUpstreamThatStallsMidStreamIsCut(t *testing.T) {
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("hi")+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	_, body := l.stream(t)
	if _, _, errs := contents(t, body); len(errs) != 1 || l.reason(reasonIdle) != 1 {
		t.Fatalf("errors %v, idle count %v", errs, l.reason(reasonIdle))
	}
}

// The upstream sends the next event only after the client has seen the
// previous one: a gateway that held events back until its buffer filled
// would deadlock here.
func TestNoEventWaitsForTheNextRead(t *testing.T) {
	seen := make(chan struct{})
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 20 {
			io.WriteString(w, chunkLine("t ")+"\n\n") // nothing for the redactor to hold
			w.(http.Flusher).Flush()
			if i < 19 {
				select {
				case <-seen:
				case <-time.After(5 * time.Second):
					return // the gateway held the event back
				}
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	resp := l.post(t, "k-acme", `{"stream":true}`)
	sc := bufio.NewScanner(resp.Body)
	events := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: {") {
			events++
			if events < 20 {
				seen <- struct{}{}
			}
		}
	}
	if events != 20 {
		t.Fatalf("client saw %d of 20 events one by one", events)
	}
}

// A burst of events already buffered goes out in a few writes, not one
// flush per event.
func TestBurstsAreCoalesced(t *testing.T) {
	var lines []string
	for range 2000 {
		lines = append(lines, chunkLine(" tok"), "")
	}
	l := newLab(t, sseUpstream(append(lines, "data: [DONE]", "")...))
	resp := l.post(t, "k-acme", `{"stream":true}`)
	reads := 0
	buf := make([]byte, 1<<20)
	for {
		_, err := resp.Body.Read(buf)
		reads++
		if err != nil {
			break
		}
	}
	if reads > 200 {
		t.Fatalf("2000 buffered events reached the client in %d reads: writes are not coalesced", reads)
	}
}

func TestClientGoingAwayCancelsTheUpstream(t *testing.T) {
	upstreamDone := make(chan error, 1)
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, chunkLine(" forever")+"\n\n"); err != nil {
				upstreamDone <- err
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				upstreamDone <- r.Context().Err()
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.gw.URL+RouteStream, strings.NewReader(`{"stream":true}`))
	req.Header.Set("Authorization", "Bearer k-acme")
	resp, err := l.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 4096))
	cancel()
	resp.Body.Close()
	select {
	case err := <-upstreamDone:
		if err == nil {
			t.Fatal("upstream ended without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not canceled")
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.outcomes(t, OutcomeClientCanceled) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("stream not recorded as client_canceled")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readJSON(t *testing.T, r io.Reader, v any) string {
	t.Helper()
	b, _ := io.ReadAll(r)
	if err := json.Unmarshal(b, v); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("not JSON: %s", b)
	}
	return string(b)
}

// An upstream 4xx that blames the request is the client's mistake: it goes
// back to the client as it is and burns no availability budget. The
// upstream's own refusals (credentials, capacity) and 5xx stay
// upstream_error.
func TestRequestErrorsFromTheUpstreamAreRejectedNotUpstreamErrors(t *testing.T) {
	for _, c := range []struct {
		code, status int
		outcome      string
		reason       string
	}{
		{400, 400, OutcomeRejected, ""},
		{404, 404, OutcomeRejected, ""},
		{422, 422, OutcomeRejected, ""},
		{401, 502, OutcomeUpstreamError, reason4xx},
		{403, 502, OutcomeUpstreamError, reason4xx},
		{429, 429, OutcomeUpstreamError, reason4xx},
		// Not the provider's error shape: a wrong upstream URL, not a
		// client's mistake (see plain below).
		{-404, 502, OutcomeUpstreamError, reason4xx},
		{500, 502, OutcomeUpstreamError, reason5xx},
		{503, 502, OutcomeUpstreamError, reason5xx},
	} {
		t.Run(fmt.Sprint(c.code), func(t *testing.T) {
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				if c.code < 0 {
					http.NotFound(w, r) // "404 page not found": no provider said that
					return
				}
				http.Error(w, `{"error":{"message":"model 'nope' does not exist, ask bob@example.com"}}`, c.code)
			})
			resp := l.post(t, "k-acme", `{"model":"nope","stream":true}`)
			var e openai.Error
			raw := readJSON(t, resp.Body, &e)
			if resp.StatusCode != c.status || e.Error.Message == "" || strings.Contains(raw, "bob@") {
				t.Fatalf("client got %d %s, want %d with the upstream's message, redacted", resp.StatusCode, raw, c.status)
			}
			if got := l.outcomes(t, c.outcome); got != 1 {
				t.Errorf("outcome %s recorded %d times, want 1", c.outcome, got)
			}
			for _, r := range []string{reason4xx, reason5xx} {
				want := 0.0
				if r == c.reason {
					want = 1
				}
				if got := l.reason(r); got != want {
					t.Errorf("upstream errors %s = %v, want %v", r, got, want)
				}
			}
		})
	}
}

// Admission only needed a positive balance, and tokens are charged as they
// stream, so any number of one tenant's requests were admitted at once.
func TestConcurrentStreamsPerTenantAreLimited(t *testing.T) {
	release := make(chan struct{})
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("hold")+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	var held []*http.Response
	for range 2 {
		resp := l.post(t, "k-pair", `{"stream":true}`)
		if resp.StatusCode != 200 {
			t.Fatalf("stream within the limit: %d", resp.StatusCode)
		}
		held = append(held, resp)
	}
	third := l.post(t, "k-pair", `{"stream":true}`)
	var e openai.Error
	raw := readJSON(t, third.Body, &e)
	if third.StatusCode != 429 || third.Header.Get("Retry-After") == "" || !strings.Contains(e.Error.Message, "in flight") {
		t.Fatalf("third concurrent stream: %d Retry-After=%q %s; want 429 with Retry-After", third.StatusCode, third.Header.Get("Retry-After"), raw)
	}
	if resp := l.post(t, "k-acme", `{"stream":true}`); resp.StatusCode != 200 {
		t.Fatalf("another tenant is held by pair's limit: %d", resp.StatusCode)
	}
	if n := testutil.ToFloat64(l.m.rejections.WithLabelValues("pair", limitStreams)); n != 1 {
		t.Errorf("stream-limit rejections = %v, want 1", n)
	}
	close(release)
	io.ReadAll(held[0].Body)
	held[0].Body.Close()
	// The slot is freed when the handler returns, just after the client
	// has read the end of the stream.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := l.post(t, "k-pair", `{"stream":true}`)
		io.ReadAll(resp.Body)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a finished stream's slot was never freed: %d", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// max_tokens sized the fixed transcript up front, so one request could
// reserve 64 MiB before a byte streamed; memory must follow what streamed.
func TestMaxTokensDoesNotReserveMemory(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 64)
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("hello")+"\n\n")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	const streams = 40
	runtime.GC()
	var before, during runtime.MemStats
	runtime.ReadMemStats(&before)
	var resps []*http.Response
	for range streams {
		resps = append(resps, l.post(t, "k-acme", `{"stream":true,"max_tokens":1048576}`))
		<-started
	}
	runtime.ReadMemStats(&during)
	close(release)
	for _, r := range resps {
		io.ReadAll(r.Body)
	}
	grew := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew %d KiB for %d streams asking for max_tokens 1048576", grew>>10, streams)
	if perStream := grew / streams; perStream > 1<<20 {
		t.Fatalf("each stream holds %d KiB before streaming anything; want well under the MiB max_tokens once reserved", perStream>>10)
	}
}

// Every text a client can read goes through the redactor: each choice's
// content, refusal and reasoning, and tool-call arguments, each with its
// own hold-back so PII split across chunks of one choice is caught and two
// choices never mix.
func TestRedactsEveryChoiceAndEveryTextField(t *testing.T) {
	chunk := func(body string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[` + body + `]}`
	}
	l := newLab(t, sseUpstream(
		chunk(`{"index":0,"delta":{"content":"Hi, mail al"}},{"index":1,"delta":{"content":"write to bob@exa"}}`), "",
		chunk(`{"index":1,"delta":{"content":"mple.org now"}}`), "",
		chunk(`{"delta":{"content":"ice@example.com today"},"index":0}`), "",
		chunk(`{"index":0,"delta":{"refusal":"I won't call +1 555 123 4567"}}`), "",
		chunk(`{"index":1,"delta":{"reasoning_content":"card 4111 1111"}}`), "",
		chunk(`{"index":1,"delta":{"reasoning_content":" 1111 1111 is hers"}}`), "",
		chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"send","arguments":"{\"to\":\"carol@exam"}}]}}`), "",
		chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ple.com\"}"}}]}}`), "",
		// An escaped key is still content to a client's JSON decoder.
		chunk(`{"index":1,"delta":{"con\u0074ent":" and dave@example.net"}}`), "",
		// A key ending in the bytes "content": not the content.
		`data: {"a\"content":"x","choices":[{"index":0,"delta":{"content":" or erin@example.com"}}]}`, "",
		chunk(`{"index":1,"delta":{"content":" or frank@exam"}}`), "",
		"data: [DONE]", ""))
	_, body := l.stream(t)
	for _, leak := range []string{"alice", "bob@", "555 123", "4111", "carol", "dave", "erin"} {
		if strings.Contains(body, leak) {
			t.Errorf("%q reached the client", leak)
		}
	}
	// What a client assembles per choice and field.
	got := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok || payload == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Index    int                        `json:"index"`
				RawDelta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatalf("the client got a line that is not JSON: %s (%v)", payload, err)
		}
		for _, ch := range c.Choices {
			for field, raw := range ch.RawDelta {
				if field == "tool_calls" {
					var calls []struct {
						Index    int `json:"index"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					}
					json.Unmarshal(raw, &calls)
					for _, call := range calls {
						got[fmt.Sprintf("%d/tool%d", ch.Index, call.Index)] += call.Function.Arguments
					}
					continue
				}
				var s string
				json.Unmarshal(raw, &s)
				got[fmt.Sprintf("%d/%s", ch.Index, field)] += s
			}
		}
	}
	want := map[string]string{
		"0/content": "Hi, mail [REDACTED:EMAIL] today or [REDACTED:EMAIL]",
		"0/refusal": "I won't call [REDACTED:PHONE]",
		"0/tool0":   `{"to":"[REDACTED:EMAIL]"}`,
		// Held back as a possible address, released at the end as it is.
		"1/content":           "write to [REDACTED:EMAIL] now and [REDACTED:EMAIL] or frank@exam",
		"1/reasoning_content": "card [REDACTED:CARD] is hers",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: client assembled %q\n want %q", k, got[k], w)
		}
	}
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream did not finish:\n%s", body)
	}
	if n := testutil.ToFloat64(l.m.redactions.WithLabelValues("email")); n != 5 {
		t.Errorf("email redactions = %v, want 5", n)
	}
}

// A chunk without text is metadata: redacting it as plain text turned
// every real provider's "created" timestamp into a phone number and the
// chunk into invalid JSON.
func TestChunksWithoutTextPassAsTheyCame(t *testing.T) {
	role := `data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1733011200,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}`
	usage := `data: {"id":"chatcmpl-9x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5551234567}}`
	l := newLab(t, sseUpstream(role, "", chunkLine("hi"), "", usage, "", "data: [DONE]", ""))
	_, body := l.stream(t)
	for _, line := range []string{role, usage} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metadata chunk changed on the way:\n sent %s\n got\n%s", line, body)
		}
	}
	if got := l.reason(reasonInvalidJSON); got != 0 {
		t.Errorf("valid chunks counted as invalid JSON %v times", got)
	}
}

// Requests whose answers would carry text the gateway cannot redact are
// refused: more choices than it keeps state for, log probabilities (every
// token again, bytes included), audio.
func TestRequestsForUnredactableAnswersAreRefused(t *testing.T) {
	called := false
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) { called = true })
	for _, body := range []string{
		`{"stream":true,"n":65}`,
		`{"stream":true,"logprobs":true}`,
		`{"stream":true,"top_logprobs":5}`,
		`{"stream":true,"modalities":["text","audio"]}`,
		`{"stream":true,"audio":{"voice":"alloy","format":"pcm16"}}`,
	} {
		resp := l.post(t, "k-acme", body)
		var e openai.Error
		raw := readJSON(t, resp.Body, &e)
		if resp.StatusCode != 400 || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want 400 saying why", body, resp.StatusCode, raw)
		}
	}
	if called {
		t.Error("a refused request reached the upstream")
	}
	if resp := l.post(t, "k-acme", `{"stream":true,"n":2,"logprobs":false,"audio":null}`); resp.StatusCode == 400 {
		t.Error("n=2 without log probabilities or audio is an ordinary request")
	}
}

// An upstream can still send what was not asked for. A chunk the gateway
// cannot redact — valid JSON past its limits, which a client would decode,
// escapes and all — ends the stream; it is never forwarded as it came.
func TestChunksTheGatewayCannotRedactEndTheStream(t *testing.T) {
	var many []string
	tool := func(i int, args string) string {
		return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%q}}]}}]}`, i, args)
	}
	for i := range maxTextStreams + 1 {
		many = append(many, tool(i, "hi"), "")
	}
	many = append(many, tool(64, "mail bob@exa"), "", tool(64, "mple.org now"), "")
	deep := `data: {"choices":[{"index":0,"delta":{"content":"bob\u0040example.org"}}],"pad":` +
		strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40) + "}"
	for name, c := range map[string]struct {
		lines  []string
		reason string
	}{
		"65 text streams":   {many, reasonTooManyTexts},
		"an index of -1":    {[]string{`data: {"choices":[{"index":-1,"delta":{"content":"bob\u0040example.org"}}]}`, ""}, reasonUnredactable},
		"nested too deep":   {[]string{deep, ""}, reasonUnredactable},
		"log probabilities": {[]string{chunkLine("x"), "", `data: {"choices":[{"index":0,"delta":{"content":"y"},"logprobs":{"content":[{"token":"bob@example.org","bytes":[98,111,98]}]}}]}`, ""}, reasonUnredactable},
		"audio":             {[]string{`data: {"choices":[{"index":0,"delta":{"audio":{"transcript":"call 555-123-4567"}}}]}`, ""}, reasonUnredactable},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLab(t, sseUpstream(append(c.lines, "data: [DONE]", "")...))
			_, body := l.stream(t)
			// What a client decodes from every line it got.
			for _, line := range strings.Split(body, "\n") {
				payload, _ := strings.CutPrefix(line, "data: ")
				var v any
				decoded := payload
				if json.Unmarshal([]byte(payload), &v) == nil {
					b, _ := json.Marshal(v)
					decoded = string(b)
				}
				for _, pii := range []string{"bob@exa", "bob\\u0040", "555-123-4567", "bob@example"} {
					if strings.Contains(decoded, pii) || strings.Contains(payload, pii) {
						t.Fatalf("%q reached the client in %s", pii, line)
					}
				}
			}
			_, done, errs := contents(t, body)
			if done || len(errs) != 1 || l.reason(c.reason) != 1 {
				t.Fatalf("want the stream ended with one error event and reason %s; done=%v errors=%v\n%.400s", c.reason, done, errs, body)
			}
		})
	}
}

// A held tail goes out before the chunk that finishes its choice, and a
// released tail repeats nothing its template chunk said once: a client
// that stops at finish_reason, or appends a tool call's name, gets what the
// upstream sent.
func TestHeldTextGoesOutBeforeTheFinishAndRepeatsNothing(t *testing.T) {
	l := newLab(t, sseUpstream(
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"The answer is 42"},"finish_reason":"stop"}]}`, "",
		`data: {"id":"c","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"dial","arguments":"{\"to\":\"555"}}]}}]}`, "",
		`data: {"id":"c","choices":[{"index":2,"delta":{"content":"mail bob"}}]}`, "",
		`data: {"id":"c","choices":[{"index":2,"delta":{},"finish_reason":"length"}]}`, "",
		`data: {"id":"c","choices":[{"index":3,"delta":{"content":"a"}},{"index":3,"delta":{"content":"b 12"}}]}`, "",
		`data: {"id":"c","choices":[],"usage":{"completion_tokens":9}}`, "",
		"data: [DONE]", ""))
	_, body := l.stream(t)
	type choice struct {
		Index        int     `json:"index"`
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       *string `json:"id"`
				Type     *string `json:"type"`
				Function struct {
					Name      *string `json:"name"`
					Arguments string  `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	}
	text := map[int]string{}
	finished := map[int]int{}
	var names, ids string
	usages := 0
	for _, line := range strings.Split(body, "\n") {
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok || payload == "[DONE]" {
			continue
		}
		var c struct {
			Choices []choice        `json:"choices"`
			Usage   json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatalf("not JSON: %s", payload)
		}
		if len(c.Usage) > 0 && string(c.Usage) != "null" {
			usages++
		}
		for _, ch := range c.Choices {
			got := ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				got += tc.Function.Arguments
				if tc.Function.Name != nil {
					names += *tc.Function.Name
				}
				if tc.ID != nil {
					ids += *tc.ID
				}
			}
			if got != "" && finished[ch.Index] > 0 {
				t.Errorf("choice %d got %q after its finish_reason", ch.Index, got)
			}
			text[ch.Index] += got
			if ch.FinishReason != nil {
				finished[ch.Index]++
			}
		}
	}
	want := map[int]string{0: "The answer is 42", 1: `{"to":"555`, 2: "mail bob", 3: "ab 12"}
	for i, w := range want {
		if text[i] != w {
			t.Errorf("choice %d: client assembled %q, want %q", i, text[i], w)
		}
	}
	if finished[0] != 1 || finished[2] != 1 || names != "dial" || ids != "call_1" || usages != 1 {
		t.Errorf("said once each: finish_reason %v, tool name %q, id %q, usage %d times\n%s", finished, names, ids, usages, body)
	}
}

// An upstream that answers an error status and then sends no body is not
// waited on past the idle timeout: the client hears the status.
func TestAnErrorStatusWithAStalledBodyIsAnswered(t *testing.T) {
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, func(cfg *Config) { cfg.IdleTimeout = 100 * time.Millisecond })
	// The client's own bound is far above the idle timeout: a gateway
	// that waited on the body would meet it first.
	client := l.gw.Client()
	client.Timeout = 20 * time.Second
	req, _ := http.NewRequest(http.MethodPost, l.gw.URL+RouteStream, strings.NewReader(`{"stream":true}`))
	req.Header.Set("Authorization", "Bearer k-acme")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the gateway never answered: %v", err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 502 || !strings.Contains(string(b), "503") {
		t.Errorf("%d %s, want 502 naming the upstream's 503", resp.StatusCode, b)
	}
}

// A burst that fills the write buffer after an upstream pause longer than
// the client write timeout is written under a deadline of its own: the
// client is reading, so the stream is ok.
func TestABurstAfterALongPauseIsNotCutByTheOldDeadline(t *testing.T) {
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("before")+"\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(600 * time.Millisecond) // past the write timeout, within the idle timeout
		for range 1000 {                   // ~90 KB: the buffer fills and is written mid-burst
			io.WriteString(w, chunkLine(" after")+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}, func(cfg *Config) { cfg.ClientWriteTimeout, cfg.IdleTimeout = 200*time.Millisecond, 5*time.Second })
	_, body := l.stream(t)
	if _, done, errs := contents(t, body); !done || len(errs) > 0 {
		t.Fatalf("done=%v errors=%v", done, errs)
	}
	if l.outcomes(t, OutcomeOK) != 1 {
		t.Errorf("outcome: ok %d, client_canceled %d", l.outcomes(t, OutcomeOK), l.outcomes(t, OutcomeClientCanceled))
	}
}
