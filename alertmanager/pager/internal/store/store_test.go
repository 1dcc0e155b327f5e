package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burnlab/shared/incident"
)

var start = time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)

func page(fp string) Alert {
	return Alert{Status: "firing", Fingerprint: fp, StartsAt: start, Labels: map[string]string{"alertname": "A", "severity": "page", "sloth_slo": "s"}}
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tear leaves what a crash in the middle of a write leaves: the start of a
// record and no newline.
func tear(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"notification","alert":{"stat`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// journalLines fails the test on any line of the journal that does not
// decode, and on a last line without its newline.
func journalLines(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("journal ends without a newline: %q", b[max(0, len(b)-60):])
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("journal line %d does not decode (%v): %.80s", n, err, sc.Text())
		}
	}
	return n
}

func hasIncident(s *Store, fp string) bool {
	_, ok := s.Incident(IncidentID(&Alert{Fingerprint: fp, StartsAt: start}))
	return ok
}

// A notification acknowledged after a crash tore the journal's last line
// must survive the next restart, and the one after: appending it onto the
// fragment would glue the two into one unreadable line.
func TestATornWriteDoesNotSwallowTheNextAcknowledgedRecord(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.AddNotification("pager-page", []Alert{page("00000000000000f1")}, start); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tear(t, dir)

	s = open(t, dir)
	if s.Skipped() != 1 {
		t.Errorf("torn line: skipped %d lines, want 1", s.Skipped())
	}
	if got, err := s.AddNotification("pager-page", []Alert{page("00000000000000f2")}, start); err != nil || len(got) != 1 {
		t.Fatalf("after the torn write: %+v %v", got, err)
	}
	// kill -9 here: AddNotification fsynced, Close adds nothing.
	s.Close()

	s = open(t, dir)
	for _, fp := range []string{"00000000000000f1", "00000000000000f2"} {
		if !hasIncident(s, fp) {
			t.Errorf("first reopen: acknowledged %s lost (skipped %d lines)", fp, s.Skipped())
		}
	}
	if s.Skipped() != 0 {
		t.Errorf("first reopen: skipped %d lines, want 0: the fragment was cut", s.Skipped())
	}
	if got, err := s.AddNotification("pager-page", []Alert{page("00000000000000f3")}, start); err != nil || len(got) != 1 {
		t.Fatalf("third: %+v %v", got, err)
	}
	s.Close()

	s = open(t, dir)
	for _, fp := range []string{"00000000000000f1", "00000000000000f2", "00000000000000f3"} {
		if !hasIncident(s, fp) {
			t.Errorf("second reopen: acknowledged %s lost (skipped %d lines)", fp, s.Skipped())
		}
	}
	if n := journalLines(t, dir); n != 3 {
		t.Errorf("journal has %d lines, want 3", n)
	}
}

// A journal torn before its first newline is cut to nothing.
func TestATornFirstLineIsCutToAnEmptyJournal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, journalName), []byte(`{"type":"noti`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	if s.Skipped() != 1 || s.Cut() != int64(len(`{"type":"noti`)) {
		t.Errorf("skipped %d lines, cut %d bytes", s.Skipped(), s.Cut())
	}
	if _, err := s.AddNotification("pager-page", []Alert{page("00000000000000f1")}, start); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s = open(t, dir); !hasIncident(s, "00000000000000f1") {
		t.Fatal("acknowledged notification lost")
	}
	if n := journalLines(t, dir); n != 1 {
		t.Errorf("journal has %d lines, want 1", n)
	}
}

func TestReopenKeepsEverythingAndDedupsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	a := page("00000000000000f1")
	got, err := s.AddNotification("pager-page", []Alert{a, a}, start)
	if err != nil || len(got) != 1 || !got[0].NewPage {
		t.Fatalf("%+v %v", got, err)
	}
	if err := s.AddProfile(got[0].Incident, incident.Profile{Top: []incident.TopEntry{{Function: "f", FlatPct: 99}}}, start); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A write cut short by a crash leaves a partial line; it was never
	// acknowledged, so cutting it loses nothing.
	tear(t, dir)

	s = open(t, dir)
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
	res, err := s.AddNotification("pager-page", []Alert{a}, start.Add(time.Minute))
	if err != nil || len(res) != 1 || res[0].NewPage {
		t.Fatalf("resolution: %+v %v", res, err)
	}
	s.Close()

	// The resolution, appended after the torn fragment, is still there,
	// and still there after one more append and restart.
	s = open(t, dir)
	if inc, ok := s.Incident(res[0].Incident); !ok || inc.Status != "resolved" || len(inc.Timeline) != 3 {
		t.Fatalf("after the second reopen: %+v (skipped %d lines)", inc, s.Skipped())
	}
	if again, _ := s.AddNotification("pager-page", []Alert{a}, start); len(again) != 0 {
		t.Fatal("a retry of the resolution after a restart must be recognised")
	}
	b := page("00000000000000f2")
	if got, err := s.AddNotification("pager-page", []Alert{b}, start); err != nil || len(got) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	s.Close()
	s = open(t, dir)
	if incs := s.Incidents(); len(incs) != 2 || s.Skipped() != 0 {
		t.Fatalf("after the third reopen: %d incidents, skipped %d lines", len(incs), s.Skipped())
	}
	if n := journalLines(t, dir); n != 4 {
		t.Errorf("journal has %d lines, want 4", n)
	}
}

// halfWrite writes half of what it is given and fails, as a full disk
// does; truncating can be made to fail too.
type halfWrite struct {
	journal
	fails        int
	truncateFail bool
}

func (h *halfWrite) Write(b []byte) (int, error) {
	if h.fails > 0 {
		h.fails--
		n, _ := h.journal.Write(b[:len(b)/2])
		return n, errors.New("no space left on device")
	}
	return h.journal.Write(b)
}

func (h *halfWrite) Truncate(n int64) error {
	if h.truncateFail {
		return errors.New("input/output error")
	}
	return h.journal.Truncate(n)
}

// An append that fails halfway is refused (503, Alertmanager retries) and
// cut back off, so the next append, acknowledged, is readable.
func TestAFailedAppendIsCutBackOff(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.f = &halfWrite{journal: s.f, fails: 1}
	if got, err := s.AddNotification("pager-page", []Alert{page("00000000000000f1")}, start); err == nil {
		t.Fatalf("a half-written append was accepted: %+v", got)
	}
	if got, err := s.AddNotification("pager-page", []Alert{page("00000000000000f1")}, start); err != nil || len(got) != 1 {
		t.Fatalf("the retry: %+v %v", got, err)
	}
	s.Close()
	s = open(t, dir)
	if !hasIncident(s, "00000000000000f1") || s.Skipped() != 0 {
		t.Fatalf("after reopen: %d incidents, skipped %d lines", len(s.Incidents()), s.Skipped())
	}
	if n := journalLines(t, dir); n != 1 {
		t.Errorf("journal has %d lines, want 1", n)
	}
}

// If the fragment cannot be cut off, nothing more is acknowledged until a
// restart cuts it.
func TestAnAppendThatCannotBeUndoneStopsTheStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.f = &halfWrite{journal: s.f, fails: 1, truncateFail: true}
	if _, err := s.AddNotification("pager-page", []Alert{page("00000000000000f1")}, start); err == nil {
		t.Fatal("a half-written append was accepted")
	}
	if got, err := s.AddNotification("pager-page", []Alert{page("00000000000000f2")}, start); err == nil {
		t.Fatalf("an append after a fragment that could not be cut was accepted: %+v", got)
	}
	s.Close()
	s = open(t, dir)
	if s.Skipped() != 1 || s.Cut() == 0 || len(s.Incidents()) != 0 {
		t.Fatalf("after reopen: skipped %d, cut %d, %d incidents", s.Skipped(), s.Cut(), len(s.Incidents()))
	}
	if got, err := s.AddNotification("pager-page", []Alert{page("00000000000000f2")}, start); err != nil || len(got) != 1 {
		t.Fatalf("after the restart: %+v %v", got, err)
	}
}

// A second pager on the same data directory would interleave its records
// with the first's: it is refused with a clear error, and the directory is
// free again once the first has gone, even killed (the lock dies with its
// file descriptor).
func TestASecondPagerOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := Open(dir); err == nil || !strings.Contains(err.Error(), "in use by another pager") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second Open of one directory: %v, want a refusal", err)
	}
	first.Close()
	again, err := Open(dir)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}
