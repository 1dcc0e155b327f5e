package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"burnlab/shared/incident"
)

// factsFor is the facts of a page with fingerprint fp, naming its two delta
// profiles, which it writes.
func factsFor(t *testing.T, s *Store, fp string) incident.Facts {
	t.Helper()
	burn := func(v float64) *float64 { return &v }
	h := &incident.HeapChange{Changed: true, Function: "transcript.(*Baseline).Append", Words: "grew", Before: 1e5, During: 5e7,
		BeforeFrom: start.Add(-5 * time.Minute), BeforeTo: start.Add(-290 * time.Second), DuringFrom: start.Add(-time.Minute), DuringTo: start.Add(-50 * time.Second)}
	for _, d := range []struct {
		suffix string
		file   *string
	}{{"-delta-before", &h.BeforeFile}, {"-delta-during", &h.DuringFile}} {
		name := fmt.Sprintf("%s-%d%s.pb.gz", fp, start.Unix(), d.suffix)
		if err := s.SaveProfile(name, []byte("pprof "+d.suffix)); err != nil {
			t.Fatal(err)
		}
		*d.file = ProfilesDir + "/" + name
	}
	return incident.Facts{TakenAt: start.Add(time.Second), Pair: 1, BurnFrom: start.Add(-4 * time.Minute),
		Pairs: []incident.PairBurn{{Short: "30s", Long: "1m", ShortBurn: burn(20), Factor: 14.4}, // the long window had no data
			{Short: "2m", Long: "4m", ShortBurn: burn(9.8), LongBurn: burn(8.1), Factor: 6, Fired: true}},
		Budget: &incident.Budget{SpentPct: 1.2, LeftPct: 98.8, Period: "10h", PeriodSeconds: 36000, Burn: burn(8.1), BurnWindow: "4m",
			RunsOutSeconds: burn(4391.1), RunsOut: "1h13m11s"},
		ExemplarQuery: `gateway_stream_duration_seconds_bucket{route="/v1/chat/stream"}`,
		Slowest:       []incident.Exemplar{{RequestID: "r1", Tenant: "acme", Seconds: 2.5, At: start.Add(-time.Minute)}},
		Heap:          h, Errors: []string{"the slowest requests: a test"}}
}

// A page's facts are journaled like its profiles: they come back whole on
// restart, their delta profiles are kept while the incident is (Open's
// sweep removes only files no incident names), and a compaction keeps
// them in its snapshot, removing the delta files of what it drops.
func TestFactsSurviveRestartAndCompaction(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	want := map[string]incident.Facts{}
	wantGC := map[string]incident.GCAfter{}
	var ids []string
	for i, fp := range []string{"00000000000000a1", "00000000000000a2"} {
		a := page(fp)
		a.StartsAt = start.Add(time.Duration(i) * time.Minute) // a2 is the newer
		acc, err := s.AddNotification("pager-page", "page", []Alert{a}, a.StartsAt)
		if err != nil {
			t.Fatal(err)
		}
		f := factsFor(t, s, fp)
		if err := s.AddFacts(acc[0].Incident, f, a.StartsAt.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		a.Status, a.EndsAt = "resolved", a.StartsAt.Add(5*time.Minute)
		if _, err := s.AddNotification("pager-page", "page", []Alert{a}, a.EndsAt); err != nil {
			t.Fatal(err)
		}
		share := 0.06
		g := incident.GCAfter{Job: "gateway", From: a.EndsAt.Add(-time.Minute), To: a.EndsAt, CPUShare: &share, Words: "after the resolve GC took 6%"}
		if err := s.AddGCAfter(acc[0].Incident, g, a.EndsAt.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		want[acc[0].Incident], wantGC[acc[0].Incident] = f, g
		ids = append(ids, acc[0].Incident)
	}
	check := func(s *Store, when string, kept ...string) {
		t.Helper()
		if got := s.Len(); got != len(kept) {
			t.Errorf("%s: %d incidents, want %d", when, got, len(kept))
		}
		for _, id := range kept {
			inc, ok := s.Incident(id)
			if !ok || inc.Facts == nil {
				t.Errorf("%s: incident %s has no facts", when, id)
				continue
			}
			if w := want[id]; !reflect.DeepEqual(*inc.Facts, w) {
				got, _ := json.Marshal(inc.Facts)
				exp, _ := json.Marshal(w)
				t.Errorf("%s: facts of %s\n got %s\nwant %s", when, id, got, exp)
			}
			if inc.Timeline[1].Kind != incident.FactsRead || inc.Timeline[1].What() != inc.Facts.Summary() {
				t.Errorf("%s: the timeline's second event is %+v, want the facts' line", when, inc.Timeline[1])
			}
			last := inc.Timeline[len(inc.Timeline)-1]
			if w := wantGC[id]; inc.GCAfter == nil || !reflect.DeepEqual(*inc.GCAfter, w) || last.Kind != incident.GCAfterRead || last.What() != w.Words {
				t.Errorf("%s: the GC after the resolve of %s is %+v, the timeline's last event %+v; want %+v", when, id, inc.GCAfter, last, w)
			}
			for _, file := range []string{inc.Facts.Heap.BeforeFile, inc.Facts.Heap.DuringFile} {
				if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
					t.Errorf("%s: the delta profile of a kept incident: %v", when, err)
				}
				if n := s.Shares(file); n != 1 {
					t.Errorf("%s: %s is named by %d incidents, want 1", when, file, n)
				}
			}
		}
	}
	check(s, "before a restart", ids...)
	s.Close()

	s = open(t, dir)
	check(s, "after a restart", ids...)
	s.Close()

	// Only the newest resolved incident is kept: Open compacts.
	s, err := Open(dir, Options{MaxResolved: 1, Now: func() time.Time { return start.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Opened(); !c.Ran || c.Dropped != 1 || c.Files != 2 {
		t.Errorf("compaction: %+v, want one incident dropped with its two delta profiles", c)
	}
	check(s, "after the compaction", ids[1])
	gone := want[ids[0]].Heap
	for _, file := range []string{gone.BeforeFile, gone.DuringFile} {
		if _, err := os.Stat(filepath.Join(dir, file)); !os.IsNotExist(err) {
			t.Errorf("the dropped incident's %s: %v, want it removed", file, err)
		}
	}
	if n := journalLines(t, dir); n != 1 {
		t.Errorf("the compacted journal has %d lines, want 1 snapshot", n)
	}
	s.Close()

	s = open(t, dir) // reads the snapshot back
	check(s, "after the compaction and a restart", ids[1])
}
