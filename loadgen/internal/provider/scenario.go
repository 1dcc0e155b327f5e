package provider

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"burnlab/shared/scenario"
	"burnlab/shared/variant"
)

// Scenarios holds the lab's active scenario (shared/scenario's table) and
// picks the streams its fault hits. A scenario is set at run time through
// the control endpoint, so a fault is injected without restarting
// anything.
type Scenarios struct {
	now    func() time.Time
	active *prometheus.GaugeVec

	mu    sync.Mutex
	cur   scenario.Scenario
	since time.Time
	// acc accumulates the share of each stream; a stream is hit when it
	// passes 1, so exactly one in 1/share is, evenly spaced.
	acc  float64
	hits uint64
}

func newScenarios(reg prometheus.Registerer, now func() time.Time) *Scenarios {
	s := &Scenarios{now: now, active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: scenario.Metric,
		Help: "1 for the lab scenario the upstream injects now (make scenario S=…), 0 for every other.",
	}, []string{"scenario"})}
	reg.MustRegister(s.active)
	none, _ := scenario.Lookup(scenario.None) // the table always has it
	s.set(none)
	return s
}

func (s *Scenarios) set(sc scenario.Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.since, s.acc, s.hits = sc, s.now(), 0, 0
	for _, name := range scenario.Names() {
		v := 0.0
		if name == sc.Name {
			v = 1
		}
		s.active.WithLabelValues(name).Set(v)
	}
}

// hit is what the active scenario does to the next stream, of length
// events: its fault, or NoFault, and the number of the hit (from 1), which
// alternates a Fail's two kinds. A Regress hits no stream: it changes the
// provider's own code, not what it does to the gateway's streams.
func (s *Scenarios) hit(length int) (scenario.Scenario, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Fault == scenario.NoFault || s.cur.Fault == scenario.Regress || s.cur.MaxEvents > 0 && length > s.cur.MaxEvents {
		return s.cur, 0
	}
	s.acc += s.cur.Share(s.now().Sub(s.since))
	if s.acc < 1 {
		return s.cur, 0
	}
	s.acc--
	s.hits++
	return s.cur, s.hits
}

// regressed says whether the provider runs its own regression
// (scenario.Regress): a code path switched at run time, for every
// non-streaming answer while the scenario runs.
func (s *Scenarios) regressed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Fault == scenario.Regress
}

// scenarioState is the control endpoint's answer.
type scenarioState struct {
	Scenario string             `json:"scenario"`
	Since    time.Time          `json:"since"`
	Build    variant.Variant    `json:"build"`
	What     string             `json:"what"`
	Share    float64            `json:"share_now"`
	Burn     map[string]float64 `json:"expected_burn"`
	Why      string             `json:"why"`
	Fires    []string           `json:"fires"`
	Hits     uint64             `json:"streams_hit"`
}

func (s *Scenarios) state() scenarioState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := scenarioState{Scenario: s.cur.Name, Since: s.since, Build: s.cur.Build, What: s.cur.What,
		Share: s.cur.Share(s.now().Sub(s.since)), Burn: s.cur.Burn, Why: s.cur.Why, Hits: s.hits, Fires: []string{}}
	for _, a := range s.cur.Fires {
		st.Fires = append(st.Fires, a.String())
	}
	return st
}

// Register adds the control endpoint to mux: GET /scenario says which
// scenario runs; PUT /scenario/{name} starts one (none clears it), and
// ?share=0.05 starts a one-step fault at that share instead of the table's. Setting
// the running one again restarts its clock, so a creep climbs again.
func (s *Scenarios) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /scenario", func(w http.ResponseWriter, _ *http.Request) { s.write(w) })
	mux.HandleFunc("PUT /scenario/{name}", func(w http.ResponseWriter, r *http.Request) {
		sc, err := scenario.Lookup(r.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if q := r.URL.Query().Get("share"); q != "" {
			share, err := strconv.ParseFloat(q, 64)
			if err == nil {
				sc, err = sc.WithShare(share)
			}
			if err != nil {
				http.Error(w, "share="+q+": "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		s.set(sc)
		s.write(w)
	})
}

func (s *Scenarios) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.state()) // a client gone before its answer: nothing to do
}
