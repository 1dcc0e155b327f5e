package load

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"burnlab/shared/scenario"
)

// The direct clients ask one long answer in scenario.DirectLongEvery, and
// count what came back.
func TestDirectAsksOneLongAnswerInAHundred(t *testing.T) {
	const want = 2 * scenario.DirectLongEvery
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var asked []int
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if asked = append(asked, req.MaxTokens); len(asked) == want {
			cancel()
		}
		w.Write([]byte(`{}`))
	}))
	defer s.Close()
	reg := prometheus.NewRegistry()
	if err := RunDirect(ctx, Direct{URL: s.URL, Rate: 1000}, reg); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	long := 0
	for _, n := range asked {
		switch n {
		case scenario.DirectLongTokens:
			long++
		case scenario.DirectTokens:
		default:
			t.Errorf("asked %d words", n)
		}
	}
	if len(asked) < want || long != len(asked)/scenario.DirectLongEvery {
		t.Errorf("%d long answers in %d", long, len(asked))
	}
	// Those still in flight at the cancel end as errors.
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("%d families, %v", len(mfs), err)
	}
	counted := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		counted[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if counted["ok"] < want-directInFlight || counted["ok"]+counted["error"]+counted["dropped"] < float64(len(asked)) {
		t.Errorf("counted %v of %d asked", counted, len(asked))
	}
	if err := RunDirect(ctx, Direct{URL: "upstream:8081"}, prometheus.NewRegistry()); err == nil {
		t.Error("a URL without a scheme was taken")
	}
}
