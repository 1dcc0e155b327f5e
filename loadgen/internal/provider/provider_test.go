package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"burnlab/shared/openai/openaitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func serve(t *testing.T, cfg Config) (*httptest.Server, *Provider) {
	t.Helper()
	p, err := New(cfg, prometheus.NewRegistry(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s, p
}

// read parses a stream the way an OpenAI client does: each data line is a
// JSON chunk until [DONE].
func read(t *testing.T, s *httptest.Server, body string) (text string, payloads []string, done bool, status int) {
	t.Helper()
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", nil, false, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	// A reset mid-stream (the fail fault) ends the read with an error, and
	// what came before it is what the client has.
	st, _ := openaitest.Read(resp.Body)
	// A malformed-line fault's lines are in st.Malformed; every other
	// line must be an OpenAI chunk of one choice.
	for i, c := range st.Chunks {
		if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 {
			t.Fatalf("not an OpenAI chunk: %s", st.Payloads[i])
		}
	}
	return st.Text, st.Payloads, st.Done, 200
}

func TestStreamsWhatMaxTokensAsksWithinTheWriteUpsPayloads(t *testing.T) {
	s, p := serve(t, DefaultConfig())
	_, payloads, done, _ := read(t, s, `{"stream":true,"max_tokens":3000}`)
	if !done || len(payloads) != 3001 {
		t.Fatalf("%d chunks (3000 + finish), done=%v", len(payloads), done)
	}
	for _, pl := range payloads[:3000] {
		if n := len([]rune(pl)); n < 24 || n > 96 {
			t.Fatalf("payload of %d characters, outside the write-up's 24–96: %s", n, pl)
		}
	}
	if got := testutil.ToFloat64(p.events); got != 3000 {
		t.Errorf("upstream_events_total = %v", got)
	}
}

func TestSeededAndDeterministic(t *testing.T) {
	a, _ := serve(t, DefaultConfig())
	b, _ := serve(t, DefaultConfig())
	ta, _, _, _ := read(t, a, `{"stream":true,"max_tokens":500}`)
	tb, _, _, _ := read(t, b, `{"stream":true,"max_tokens":500}`)
	if ta != tb || ta == "" {
		t.Fatal("the same seed and request order must give the same text")
	}
	cfg := DefaultConfig()
	cfg.Seed = 2
	c, _ := serve(t, cfg)
	if tc, _, _, _ := read(t, c, `{"stream":true,"max_tokens":500}`); tc == ta {
		t.Fatal("another seed must give another text")
	}
}

func TestLengthsFromTheMixWithoutMaxTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ShortMin, cfg.ShortMax, cfg.LongMin, cfg.LongMax, cfg.LongShare = 5, 10, 50, 60, 0.5
	s, _ := serve(t, cfg)
	short, long := 0, 0
	for range 40 {
		_, pl, _, _ := read(t, s, `{"stream":true}`)
		switch n := len(pl) - 1; {
		case n >= 5 && n <= 10:
			short++
		case n >= 50 && n <= 60:
			long++
		default:
			t.Fatalf("length %d is in neither range", n)
		}
	}
	if short == 0 || long == 0 {
		t.Fatalf("short=%d long=%d: the mix must give both", short, long)
	}
}

func TestPIIIsSpelledAcrossEvents(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PIIEvery = 20
	s, _ := serve(t, cfg)
	text, payloads, _, _ := read(t, s, `{"stream":true,"max_tokens":4000}`)
	kinds := 0
	for _, marker := range []string{"@example.com", "+1 555 ", "sk-"} {
		if strings.Contains(text, marker) {
			kinds++
		}
		for _, pl := range payloads {
			if strings.Contains(pl, marker) && len(marker) > 6 {
				t.Fatalf("%q arrived whole in one event; PII must be split", marker)
			}
		}
	}
	if kinds < 3 {
		t.Fatalf("4,000 tokens at one item per 20 should hold every kind of PII")
	}
}

func TestFaults(t *testing.T) {
	t.Run("5xx", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Faults.Status5xx = 1
		s, _ := serve(t, cfg)
		if _, _, _, status := read(t, s, `{"stream":true,"max_tokens":10}`); status != 503 {
			t.Fatalf("status %d", status)
		}
	})
	t.Run("reset", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Faults.Reset = 1
		s, _ := serve(t, cfg)
		_, pl, done, _ := read(t, s, `{"stream":true,"max_tokens":1000}`)
		if done || len(pl) >= 1000 {
			t.Fatalf("a reset stream delivered %d chunks, done=%v", len(pl), done)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Faults.Malformed = 1
		s, _ := serve(t, cfg)
		resp, _ := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"max_tokens":50}`))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "\nthis line is not an SSE field\n") || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Fatalf("no malformed line in a finished stream:\n%.300s", b)
		}
	})
	t.Run("slow first byte", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Faults.SlowFirstByte, cfg.Faults.SlowDelay = 1, 150*time.Millisecond
		s, _ := serve(t, cfg)
		start := time.Now()
		if _, _, done, _ := read(t, s, `{"stream":true,"max_tokens":5}`); !done || time.Since(start) < 150*time.Millisecond {
			t.Fatalf("done=%v after %s", done, time.Since(start))
		}
	})
}

func TestBadRequests(t *testing.T) {
	s, _ := serve(t, DefaultConfig())
	for body, want := range map[string]int{`{"stream":`: 400, `{"stream":true,"max_tokens":0}`: 400, `{"stream":true,"max_tokens":100001}`: 400} {
		if _, _, _, status := read(t, s, body); status != want {
			t.Errorf("%s: %d, want %d", body, status, want)
		}
	}
	resp, _ := http.Get(s.URL + "/v1/chat/completions")
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	resp, _ = http.Post(s.URL+"/v1/models", "application/json", nil)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown route: %d", resp.StatusCode)
	}
	if _, err := New(Config{ShortMin: 5, ShortMax: 1, LongMin: 1, LongMax: 1, MaxTokens: 1}, prometheus.NewRegistry(), zerolog.Nop()); err == nil {
		t.Error("an inverted range must be refused")
	}
}

func TestNonStreamingAnswerForSDKs(t *testing.T) {
	s, _ := serve(t, DefaultConfig())
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"max_tokens":20}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Object  string
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Object != "chat.completion" || c.Choices[0].Message.Content == "" {
		t.Fatalf("%+v %v", c, err)
	}
}
