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
