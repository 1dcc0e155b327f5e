package provider

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"burnlab/shared/scenario"
)

// control serves the provider with its scenario endpoint, as cmd/upstream
// does.
func control(t *testing.T) (*httptest.Server, *Provider, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(DefaultConfig(), reg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", p)
	p.Scenarios.Register(mux)
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, p, reg
}

func put(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestScenarioControlSetsTheActiveScenarioAndItsGauge(t *testing.T) {
	s, _, reg := control(t)
	active := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != scenario.Metric {
				continue
			}
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	if got := active(); got[scenario.None] != 1 || len(got) != len(scenario.Names()) {
		t.Fatalf("at start: %v, want none=1 and a series per scenario", got)
	}
	code, body := put(t, s.URL+"/scenario/upstream-tail")
	var st scenarioState
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Scenario != "upstream-tail" || st.Burn[scenario.StreamLatency] != 10 {
		t.Fatalf("PUT: %d %v %s", code, err, body)
	}
	if got := active(); got["upstream-tail"] != 1 || got[scenario.None] != 0 {
		t.Fatalf("after the PUT: %v", got)
	}
	resp, err := http.Get(s.URL + "/scenario")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"scenario": "upstream-tail"`) {
		t.Fatalf("GET /scenario: %s", b)
	}
	// A name outside the table is refused, never a new label value.
	code, body = put(t, s.URL+"/scenario/%3Cscript%3E")
	if code != 404 || !strings.Contains(body, "creep") {
		t.Fatalf("unknown scenario: %d %s", code, body)
	}
	if got := active(); len(got) != len(scenario.Names()) || got["upstream-tail"] != 1 {
		t.Fatalf("after a refused PUT: %v", got)
	}
	if code, _ := put(t, s.URL+"/scenario/none"); code != 200 || active()[scenario.None] != 1 {
		t.Fatal("none must clear the scenario")
	}
	// ?share= runs a one-step fault harder, its burn scaled; a bad share or
	// a scenario without one share is refused and changes nothing.
	code, body = put(t, s.URL+"/scenario/upstream-errors?share=0.05")
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Share != 0.05 || st.Burn[scenario.Availability] != 50 {
		t.Fatalf("PUT with a share: %d %v %s", code, err, body)
	}
	for _, bad := range []string{"upstream-errors?share=0", "upstream-errors?share=1.5", "upstream-errors?share=NaN", "upstream-errors?share=x", "creep?share=0.1", "none?share=0.1"} {
		if code, body := put(t, s.URL+"/scenario/"+bad); code != 400 || !strings.Contains(body, "share") {
			t.Errorf("%s: %d %s, want 400", bad, code, body)
		}
	}
	if got := active(); got["upstream-errors"] != 1 {
		t.Fatalf("after refused shares: %v", got)
	}
}

// The share is exact, not a coin toss: a short window's burn rate is the
// scenario's, and a creep climbs step by step with time.
func TestScenarioHitsExactlyItsShareAndClimbs(t *testing.T) {
	now := time.Unix(0, 0)
	s := newScenarios(prometheus.NewRegistry(), func() time.Time { return now })
	creep, err := scenario.Lookup("creep")
	if err != nil {
		t.Fatal(err)
	}
	s.set(creep)
	for i, st := range creep.Steps {
		now = time.Unix(0, 0).Add(st.After)
		hits := 0
		for range 10000 {
			if _, n := s.hit(1); n > 0 {
				hits++
			}
		}
		if want := (i + 1) * 10; hits != want {
			t.Fatalf("step %d (%v): %d hits in 10,000 streams, want %d", i, st.After, hits, want)
		}
	}
	slow, err := scenario.Lookup("slow-first-token")
	if err != nil {
		t.Fatal(err)
	}
	s.set(slow)
	for range 1000 {
		if _, n := s.hit(slow.MaxEvents + 1); n > 0 {
			t.Fatal("slow-first-token hit a long generation")
		}
	}
	if _, n := s.hit(slow.MaxEvents); n != 0 {
		t.Fatal("the long generations spared must not count toward the share")
	}
	none, _ := scenario.Lookup(scenario.None)
	s.set(none)
	for range 10000 {
		if _, n := s.hit(1); n > 0 {
			t.Fatal("none hit a stream")
		}
	}
}

// each stream of a scenario that hits every stream, with a short delay.
func every(fault scenario.Fault, delay time.Duration) scenario.Scenario {
	return scenario.Scenario{Name: "test", Fault: fault, Delay: delay, Steps: []scenario.Step{{Share: 1}}}
}

func TestScenarioFaults(t *testing.T) {
	s, p, _ := control(t)
	t.Run("fail alternates 503 and a reset mid-stream", func(t *testing.T) {
		p.Scenarios.set(every(scenario.Fail, 0))
		if _, _, _, status := read(t, s, `{"stream":true,"max_tokens":100}`); status != 503 {
			t.Fatalf("first hit: %d, want 503", status)
		}
		_, pl, done, status := read(t, s, `{"stream":true,"max_tokens":100}`)
		if status != 200 || done || len(pl) != 50 {
			t.Fatalf("second hit: status %d, %d chunks, done=%v: want a 200 cut after 50", status, len(pl), done)
		}
	})
	t.Run("hold end keeps the last event back", func(t *testing.T) {
		const hold = 150 * time.Millisecond
		p.Scenarios.set(every(scenario.HoldEnd, hold))
		resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"max_tokens":20}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var first, finish time.Time
		for sc.Scan() {
			line := sc.Text()
			if first.IsZero() && strings.HasPrefix(line, "data: ") {
				first = time.Now()
			}
			if strings.Contains(line, `"finish_reason":"stop"`) {
				finish = time.Now()
			}
		}
		if finish.IsZero() || finish.Sub(first) < hold {
			t.Fatalf("finish %v after the first token, want the %v hold between them", finish.Sub(first), hold)
		}
		if got := testutil.ToFloat64(p.faults.WithLabelValues("hold_end")); got != 1 {
			t.Fatalf("upstream_faults_total{kind=hold_end} = %v", got)
		}
	})
	t.Run("slow first byte", func(t *testing.T) {
		const wait = 150 * time.Millisecond
		p.Scenarios.set(every(scenario.SlowFirstByte, wait))
		start := time.Now()
		if _, _, done, _ := read(t, s, `{"stream":true,"max_tokens":5}`); !done || time.Since(start) < wait {
			t.Fatalf("done=%v after %v, want at least %v", done, time.Since(start), wait)
		}
	})
}

// answer asks s for a non-streaming answer of words words and returns its
// text and the bytes the process allocated meanwhile.
func answer(t *testing.T, s *httptest.Server, words int) (string, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(fmt.Sprintf(`{"max_tokens":%d}`, words)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("%d: %+v %v", resp.StatusCode, c, err)
	}
	runtime.ReadMemStats(&after)
	return c.Choices[0].Message.Content, after.TotalAlloc - before.TotalAlloc
}

// provider-regression switches the provider's own code, not a sleep: the
// answer is the same text, built in quadratic space, and it is counted in
// the provider's SLI. Streams are left alone.
func TestProviderRegressionSwitchesTheCodePathOfAnswersOnly(t *testing.T) {
	s, p, reg := control(t)
	const words = 4000
	healthy, linear := answer(t, s, words)
	if code, body := put(t, s.URL+"/scenario/provider-regression"); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	p.requests.Store(0) // the same seed draws the same words again
	regressed, quadratic := answer(t, s, words)
	if regressed != healthy || len(healthy) < words {
		t.Fatalf("the regressed answer differs: %d bytes, healthy %d", len(regressed), len(healthy))
	}
	// About words²/2 × 4.5 bytes (36 MB), against some 400 KB for the
	// healthy answer with its request, JSON and the test's own client.
	if quadratic < 20*linear {
		t.Errorf("the regressed answer allocated %d bytes, the healthy one %d: want a quadratic path", quadratic, linear)
	}
	if got := testutil.CollectAndCount(reg, "upstream_completion_duration_seconds"); got != 1 {
		t.Errorf("%d completion histograms", got)
	}
	var m dto.Metric
	if err := p.completions.Write(&m); err != nil || m.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("the SLI counted %d answers (%v), want 2", m.GetHistogram().GetSampleCount(), err)
	}
	if sc, hit := p.Scenarios.hit(10); hit != 0 || sc.Name != "provider-regression" {
		t.Errorf("a stream was hit (%d) by %s", hit, sc.Name)
	}
}
