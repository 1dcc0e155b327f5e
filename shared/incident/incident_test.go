package incident

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The API's timeline carries both the facts and the words; reading it back
// keeps the facts.
func TestEventJSONHasTheFactsAndTheWords(t *testing.T) {
	e := Event{At: time.Date(2026, 12, 1, 3, 12, 5, 0, time.UTC), Kind: ProfileTaken, Top: &TopEntry{Function: "f", FlatPct: 99.5}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"profile"`, `"function":"f"`, `"what":"profile captured: top alloc_space f (99.5%)"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || back.Kind != e.Kind || back.Top.Function != "f" || !back.At.Equal(e.At) {
		t.Fatalf("read back %+v (%v) from %s", back, err, b)
	}
}

// The facts' JSON names are what the lab's e2e and the Grafana plugin
// read: a renamed field breaks them without a compile error.
func TestFactsJSONNames(t *testing.T) {
	v := 8.1
	f := Facts{Pairs: []PairBurn{{Short: "2m", Long: "4m", ShortBurn: &v, Factor: 6, Fired: true}},
		Budget:  &Budget{SpentPct: 1.2, LeftPct: 98.8, Period: "10h", RunsOut: "none left"},
		Slowest: []Exemplar{{RequestID: "r", Tenant: "t", Seconds: 1.5}},
		Heap:    &HeapChange{Changed: true, Function: "f", Words: "w"}, Errors: []string{"e"}}
	b, err := json.Marshal(struct {
		Facts *Facts `json:"facts"`
	}{&f})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Facts struct {
			Pairs []struct {
				Fired     *bool    `json:"fired"`
				ShortBurn *float64 `json:"short_burn"`
				LongBurn  *float64 `json:"long_burn"`
				Factor    *float64 `json:"factor"`
			} `json:"pairs"`
			Budget struct {
				SpentPct *float64 `json:"spent_pct"`
				LeftPct  *float64 `json:"left_pct"`
				Period   *string  `json:"period"`
			} `json:"budget"`
			Slowest []struct {
				RequestID *string  `json:"request_id"`
				Tenant    *string  `json:"tenant"`
				Seconds   *float64 `json:"seconds"`
			} `json:"slowest"`
			Heap struct {
				Changed  *bool   `json:"changed"`
				Function *string `json:"function"`
				Words    *string `json:"words"`
			} `json:"heap"`
			Errors []string `json:"errors"`
		} `json:"facts"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	p, bu, s, h := m.Facts.Pairs[0], m.Facts.Budget, m.Facts.Slowest[0], m.Facts.Heap
	if p.Fired == nil || p.ShortBurn == nil || p.Factor == nil || p.LongBurn != nil || !strings.Contains(string(b), `"long_burn":null`) ||
		bu.SpentPct == nil || bu.LeftPct == nil || bu.Period == nil || s.RequestID == nil || s.Tenant == nil || s.Seconds == nil ||
		h.Changed == nil || h.Function == nil || h.Words == nil || len(m.Facts.Errors) != 1 {
		t.Errorf("a field the e2e reads is missing from %s", b)
	}
}
