package proxy

import (
	"encoding/json"
	"fmt"
	"io"
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
	// A run of tokens whose first holds nothing back and whose last
	// does: the held tail is released in the shape tokens kept.
	f.Add("Hi |there |bob", uint64(0), "")
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
		// The whole stream in one read, so runs of tokens go by tokens,
		// and in reads that end anywhere, so a run also stops at a line
		// cut short as well as at one of another shape.
		var fast forwarded
		for _, read := range []int{64 << 10, 1 + int(layout%251)} {
			fast = rewriteAllBy(t, false, read, payloads...)
			if general := rewriteAllBy(t, true, read, payloads...); general.body != fast.body || general.transcript != fast.transcript || general.tokens != fast.tokens {
				t.Fatalf("reads of %d bytes: the fast path's stream differs from the general path's:\nfast:    %q %q %d\ngeneral: %q %q %d", read, fast.body, fast.transcript, fast.tokens, general.body, general.transcript, general.tokens)
			}
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
	return rewriteAllBy(t, false, 64<<10, payloads...)
}

// rewriteAllBy forwards payloads as one stream, each the data line of an
// event, through the per-event loop (forward), the upstream's reads
// bringing at most read bytes each; every chunk by the general path when
// generalOnly is set.
func rewriteAllBy(t *testing.T, generalOnly bool, read int, payloads ...string) forwarded {
	var body strings.Builder
	for _, p := range payloads {
		body.WriteString("data: " + p + "\n\n")
	}
	f, _ := forwardBody(t, generalOnly, read, body.String(), Limits{}.withDefaults(), 1<<20)
	return f
}

// forwardBody forwards an upstream's body, its reads bringing at most read
// bytes each, as forward does under lim with lines of at most maxLine
// bytes, and returns what it forwarded and the error that ended it (io.EOF
// for the body's end without [DONE]).
func forwardBody(t *testing.T, generalOnly bool, read int, body string, lim Limits, maxLine int) (forwarded, error) {
	tr := transcript.NewFixed(nil)
	s := &stream{acct: accounting{start: time.Now()}, lim: lim, generalOnly: generalOnly}
	s.begin(tr, MaxChoices)
	rec := httptest.NewRecorder()
	out := newFlusher(rec, time.Second)
	up := &shortReads{r: strings.NewReader(body), n: read}
	dec := sse.NewDecoder(sse.NewReader(up, 64<<10, maxLine), maxLine, out.flush)
	err := s.forward(dec, out) // the stream ends at its end or at its first error
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
	return f, err
}

// shortReads brings at most n bytes a read.
type shortReads struct {
	r io.Reader
	n int
}

func (s *shortReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

// FuzzForwardBody forwards any upstream body both ways, in reads of any
// size and with a short line limit: the client's bytes, the transcript,
// the tokens and the error that ends the stream are the general path's.
func FuzzForwardBody(f *testing.F) {
	tok := func(text string) string {
		return `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
	}
	f.Add(tok(" a")+tok(" b")+": x\n\n"+tok(" c@")+tok("d.io")+"data: [DONE]\n\n", uint8(0))
	f.Add(tok(" a")+"event: e\r\n"+tok(" b")+tok(" c\\n")+tok(" d"), uint8(7))
	f.Add(tok(" a")+tok(" b")+strings.Replace(tok(" c"), "\n\n", "\nid: 7\n\n", 1)+tok(`\"`)+tok(" é"), uint8(255))
	f.Add("\xEF\xBB\xBF"+tok(" a")+tok(" b")+"id: 1\r"+tok(" c")+tok(" 4111 1111")+tok(" 1111 1111"), uint8(200))
	f.Fuzz(func(t *testing.T, body string, read uint8) {
		lim := Limits{}.withDefaults()
		lim.Events = 50
		n := 1 + int(read)*int(read) // 1 to 65,026 bytes, most of them short
		fast, ferr := forwardBody(t, false, n, body, lim, 160)
		general, gerr := forwardBody(t, true, n, body, lim, 160)
		if fast.body != general.body || fast.transcript != general.transcript || fast.tokens != general.tokens || fmt.Sprint(ferr) != fmt.Sprint(gerr) {
			t.Fatalf("reads of %d: fast %q %q %d (%v)\ngeneral %q %q %d (%v)", n, fast.body, fast.transcript, fast.tokens, ferr, general.body, general.transcript, general.tokens, gerr)
		}
	})
}

// A run of tokens (stream.tokens) ends where the next line is no token of
// the run's shape, or where Next would end the stream, and what it
// forwarded is what the general path forwards: the same bytes, transcript,
// tokens and ending error.
func TestTokensStopWhereTheGeneralPathWould(t *testing.T) {
	tok := func(text string) string {
		return `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
	}
	run := tok(" a") + tok(" b") + tok(" c")
	long := `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 300) + `"},"finish_reason":null}]}` + "\n\n"
	lim := Limits{}.withDefaults()
	few := lim
	few.Events = 4
	for _, c := range []struct {
		name, body string
		lim        Limits
		want, end  string // in the forwarded body; in the error that ended it
	}{
		{"a comment between tokens", run + ": ping\n\n" + run, lim, "\n:\n", "EOF"},
		{"a type before a token", run + "event: note\n" + tok(" d") + run, lim, "event: note\ndata:", "EOF"},
		{"an id before a token", run + "id: 7\n" + tok(" d") + run, lim, "id: 7\ndata:", "EOF"},
		{"a token of two lines", run + "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\" d\"},\"finish_reason\":null}]}\n\n" + run, lim, `"index":0, "delta"`, "EOF"},
		{"CRLF line ends", run + strings.ReplaceAll(run, "\n", "\r\n"), lim, "", "EOF"},
		{"a lone CR", run + strings.ReplaceAll(tok(" d"), "\n", "\r") + run, lim, "", "EOF"},
		{"an escape", run + tok(`\"q\"`) + run, lim, `\"q\"`, "EOF"},
		{"a character past ASCII", run + tok(" é") + run, lim, "é", "EOF"},
		{"a finish reason", run + strings.Replace(tok(""), "null", `"stop"`, 1) + run, lim, `"stop"`, "EOF"},
		{"another choice", run + strings.Replace(tok(" d"), `"index":0`, `"index":1`, 1) + run, lim, `"index":1`, "EOF"},
		{"PII across tokens", run + tok(" bob@exa") + tok("mple.com") + run, lim, "[REDACTED:EMAIL]", "EOF"},
		{"an id after a token's data", run + strings.Replace(tok(" d"), "\n\n", "\nid: 7\n\n", 1) + run, lim, "id: 7\n", "EOF"},
		{"an unclosed string", run + strings.Replace(tok(" d"), `" d"}`, `" d}`, 1) + run, lim, `" d}`, "EOF"},
		{"the events limit", run + run, few, "", "4 events"},
		{"a line over the limit", run + long + run, lim, "", "line too long"},
		{"[DONE] after a run", run + "data: [DONE]\n\n" + run, lim, "data: [DONE]\n", "<nil>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, read := range []int{64 << 10, 37, 1} {
				fast, ferr := forwardBody(t, false, read, c.body, c.lim, 256)
				general, gerr := forwardBody(t, true, read, c.body, c.lim, 256)
				if fast.body != general.body || fast.transcript != general.transcript || fast.tokens != general.tokens || fmt.Sprint(ferr) != fmt.Sprint(gerr) {
					t.Fatalf("reads of %d: fast %q %q %d (%v)\ngeneral %q %q %d (%v)", read, fast.body, fast.transcript, fast.tokens, ferr, general.body, general.transcript, general.tokens, gerr)
				}
				if !strings.Contains(fast.body, c.want) || !strings.Contains(fmt.Sprint(ferr), c.end) {
					t.Fatalf("reads of %d: %q (%v) holds no %q, or ended otherwise than %q", read, fast.body, ferr, c.want, c.end)
				}
			}
		})
	}
}
