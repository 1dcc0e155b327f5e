package proxy

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"burnlab/gateway/internal/chunk"
	"burnlab/gateway/internal/redact"
	"burnlab/gateway/internal/sse"
	"burnlab/gateway/internal/transcript"
)

// FuzzRewriter runs a stream of chunks through the gateway's per-event
// rewriter and its end-of-stream release. texts is split on '|' into
// pieces, each placed by layout in a choice and a field of a well-formed
// chunk; raw is a payload exactly as given, in a stream of its own.
// Properties: no panic; every forwarded line is JSON when its input was;
// what a client assembles per text stream is the whole stream redacted in
// one piece, so splitting never lets PII through (within the redactor's
// hold bound); and the fast path changes nothing: each stream forwarded
// with every chunk sent by the general path gives the client the same
// bytes, the transcript the same lines and the tenant the same tokens.
func FuzzRewriter(f *testing.F) {
	f.Add("Mail jane.do|e@example.com, call +1 (555) 12|3-4567", uint64(0), "")
	f.Add("card 4111 1111 |1111 1111|key sk-abcdefghij|klmnopqrstuvwxyz", uint64(0x9c), `{"created":1733011200}`)
	f.Add("bob@exa|mple.org|al|ice@example.com", uint64(0xe4), `{"a\"content":"x","choices":[{"delta":{"content":"y@z.io"}}]}`)
	f.Add(`{"to":"carol@exam|ple.com"}`, uint64(0x3f3f), `{not json, mail bob@example.com}`)
	fields := []string{"content", "refusal", "reasoning_content", "arguments"}
	f.Fuzz(func(t *testing.T, texts string, layout uint64, raw string) {
		if raw != "" && !strings.ContainsAny(raw, "\r\n") {
			// A chunk the gateway cannot redact, or data that is no JSON
			// but holds escapes, is not forwarded at all.
			out := rewriteAll(t, raw).lines
			if len(out) > 0 {
				if line, _ := strings.CutPrefix(out[0], "data: "); json.Valid([]byte(raw)) && !json.Valid([]byte(line)) {
					t.Fatalf("valid chunk %s forwarded as invalid JSON %s", raw, line)
				}
			} else if !strings.Contains(raw, `\`) && !json.Valid([]byte(raw)) {
				t.Fatalf("text that is no JSON and holds no escape was not forwarded: %q", raw)
			}
		}
		want := map[chunk.Key]string{}
		var payloads []string
		for i, piece := range strings.Split(texts, "|") {
			bits := layout >> (uint(i%16) * 4)
			choice, field := int(bits&1), fields[bits>>1&3]
			key := chunk.Key{Choice: choice, Tool: -1, Field: chunk.Content}
			var delta any
			switch field {
			case "arguments":
				key.Tool, key.Field = 0, chunk.Arguments
				delta = map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": piece}}}}
			default:
				key.Field = map[string]chunk.Field{"content": chunk.Content, "refusal": chunk.Refusal, "reasoning_content": chunk.Reasoning}[field]
				delta = map[string]any{field: piece}
			}
			b, _ := json.Marshal(map[string]any{"created": 1733011200, "choices": []any{map[string]any{"index": choice, "delta": delta}}})
			payloads = append(payloads, string(b))
			var dec string // as a client reads it: invalid UTF-8 becomes U+FFFD
			json.Unmarshal(must(json.Marshal(piece)), &dec)
			want[key] += dec
		}
		got := map[chunk.Key]string{}
		var sc chunk.Scanner
		fast := rewriteAll(t, payloads...)
		if general := rewriteAllBy(t, true, payloads...); general.body != fast.body || general.transcript != fast.transcript || general.tokens != fast.tokens {
			t.Fatalf("the fast path's stream differs from the general path's:\nfast:    %q %q %d\ngeneral: %q %q %d", fast.body, fast.transcript, fast.tokens, general.body, general.transcript, general.tokens)
		}
		for _, line := range fast.lines {
			payload := strings.TrimPrefix(line, "data: ")
			spans, err := sc.Scan([]byte(payload))
			if err != nil {
				t.Fatalf("a well-formed chunk was forwarded as %s: %v", payload, err)
			}
			for _, sp := range spans {
				var text string
				json.Unmarshal([]byte(payload[sp.Start:sp.End]), &text)
				got[sp.Key] += text
			}
		}
		for key, whole := range want {
			if len(whole) > 2*redact.MaxHold {
				continue // the hold bound releases long runs early, by design
			}
			red, _ := redact.Text([]byte(whole))
			if got[key] != string(red) {
				t.Fatalf("stream %+v: the client assembled %q\nwant the whole redacted: %q", key, got[key], red)
			}
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// forwarded is what one stream gave its client, transcript and tenant.
type forwarded struct {
	body, transcript string
	tokens           int
	lines            []string // the body's data lines
}

// rewriteAll forwards payloads as one stream, as the gateway does.
func rewriteAll(t *testing.T, payloads ...string) forwarded {
	return rewriteAllBy(t, false, payloads...)
}

// rewriteAllBy forwards payloads as one stream, every chunk by the general
// path when generalOnly is set.
func rewriteAllBy(t *testing.T, generalOnly bool, payloads ...string) forwarded {
	tr := transcript.NewFixed(nil)
	s := &stream{acct: accounting{start: time.Now()}, lim: Limits{}.withDefaults(), tr: tr, choices: MaxChoices, generalOnly: generalOnly}
	rec := httptest.NewRecorder()
	out := newFlusher(rec, time.Second)
	for _, p := range payloads {
		if err := s.dataEvent(out, &sse.Event{Data: []byte(p), HasData: true}); err != nil {
			break // the stream ends there, as forward ends it
		}
		out.line(nil)
	}
	s.flushTail(out)
	if err := out.flush(); err != nil {
		t.Fatal(err)
	}
	f := forwarded{body: rec.Body.String(), transcript: tr.String(), tokens: s.acct.tokens}
	for _, line := range strings.Split(f.body, "\n") {
		if strings.HasPrefix(line, "data: ") {
			f.lines = append(f.lines, line)
		}
	}
	return f
}
