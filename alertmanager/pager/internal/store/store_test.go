package store

import (
	"burnlab/pager/incident"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReopenKeepsEverythingAndDedupsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)
	a := Alert{Status: "firing", Fingerprint: "f1", StartsAt: start, Labels: map[string]string{"alertname": "A", "severity": "page", "sloth_slo": "s"}}
	got, err := s.AddNotification("pager-page", []Alert{a, a}, start)
	if err != nil || len(got) != 1 || !got[0].NewPage {
		t.Fatalf("%+v %v", got, err)
	}
	s.AddProfile(got[0].Incident, incident.Profile{Top: []incident.TopEntry{{Function: "f", FlatPct: 99}}}, start)
	s.Close()
	// A write cut short by a crash leaves a partial line; it was never
	// acknowledged, so skipping it loses nothing.
	f, _ := os.OpenFile(filepath.Join(dir, journalName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"notification","alert":{"stat`)
	f.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Skipped() != 1 {
		t.Errorf("skipped %d lines", s.Skipped())
	}
	incs := s.Incidents()
	if len(incs) != 1 || incs[0].Profile == nil || len(incs[0].Timeline) != 2 {
		t.Fatalf("after reopen: %+v", incs)
	}
	again, _ := s.AddNotification("pager-page", []Alert{a}, start)
	if len(again) != 0 {
		t.Fatal("a retry after a restart must be recognised")
	}
	a.Status = "resolved"
	res, _ := s.AddNotification("pager-page", []Alert{a}, start.Add(time.Minute))
	if len(res) != 1 || res[0].NewPage {
		t.Fatalf("resolution: %+v", res)
	}
}
