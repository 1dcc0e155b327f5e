package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
	s, err := Open(dir, Options{})
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
	if _, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tear(t, dir)

	s = open(t, dir)
	if s.Skipped() != 1 {
		t.Errorf("torn line: skipped %d lines, want 1", s.Skipped())
	}
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f2")}, start); err != nil || len(got) != 1 {
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
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f3")}, start); err != nil || len(got) != 1 {
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
	if _, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err != nil {
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
	got, err := s.AddNotification("pager-page", "page", []Alert{a, a}, start)
	if err != nil || len(got) != 1 || !got[0].Fired {
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
	incs := all(s)
	if len(incs) != 1 || incs[0].Profile == nil || len(incs[0].Timeline) != 2 {
		t.Fatalf("after reopen: %+v", incs)
	}
	again, _ := s.AddNotification("pager-page", "page", []Alert{a}, start)
	if len(again) != 0 {
		t.Fatal("a retry after a restart must be recognised")
	}
	a.Status = "resolved"
	res, err := s.AddNotification("pager-page", "page", []Alert{a}, start.Add(time.Minute))
	if err != nil || len(res) != 1 || res[0].Fired {
		t.Fatalf("resolution: %+v %v", res, err)
	}
	s.Close()

	// The resolution, appended after the torn fragment, is still there,
	// and still there after one more append and restart.
	s = open(t, dir)
	if inc, ok := s.Incident(res[0].Incident); !ok || inc.Status != "resolved" || len(inc.Timeline) != 3 {
		t.Fatalf("after the second reopen: %+v (skipped %d lines)", inc, s.Skipped())
	}
	if again, _ := s.AddNotification("pager-page", "page", []Alert{a}, start); len(again) != 0 {
		t.Fatal("a retry of the resolution after a restart must be recognised")
	}
	b := page("00000000000000f2")
	if got, err := s.AddNotification("pager-page", "page", []Alert{b}, start); err != nil || len(got) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	s.Close()
	s = open(t, dir)
	if incs := all(s); len(incs) != 2 || s.Skipped() != 0 {
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
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err == nil {
		t.Fatalf("a half-written append was accepted: %+v", got)
	}
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err != nil || len(got) != 1 {
		t.Fatalf("the retry: %+v %v", got, err)
	}
	s.Close()
	s = open(t, dir)
	if !hasIncident(s, "00000000000000f1") || s.Skipped() != 0 {
		t.Fatalf("after reopen: %d incidents, skipped %d lines", len(all(s)), s.Skipped())
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
	if _, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err == nil {
		t.Fatal("a half-written append was accepted")
	}
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f2")}, start); err == nil {
		t.Fatalf("an append after a fragment that could not be cut was accepted: %+v", got)
	}
	s.Close()
	s = open(t, dir)
	if s.Skipped() != 1 || s.Cut() == 0 || len(all(s)) != 0 {
		t.Fatalf("after reopen: skipped %d, cut %d, %d incidents", s.Skipped(), s.Cut(), len(all(s)))
	}
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f2")}, start); err != nil || len(got) != 1 {
		t.Fatalf("after the restart: %+v %v", got, err)
	}
}

// A second pager on the same data directory would interleave its records
// with the first's: it is refused with a clear error, and the directory is
// free again once the first has gone, even killed (the lock dies with its
// file descriptor).
func TestASecondPagerOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if second, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "in use by another pager") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second Open of one directory: %v, want a refusal", err)
	}
	first.Close()
	again, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}

// all is every incident of s, newest first.
func all(s *Store) []incident.Incident { return s.List(Filter{}, 1, math.MaxInt).Incidents }

// history stores n incidents of s, a minute apart from start: each fires
// and, but every fifth, resolves five minutes later; the even ones are
// pages with a profile file of their own, the odd ones tickets; every
// third is of SLO "ttft", the rest "latency".
func history(t *testing.T, s *Store, n int, start time.Time) {
	t.Helper()
	for i := range n {
		at := start.Add(time.Duration(i) * time.Minute)
		sev, slo := "page", "latency"
		if i%2 == 1 {
			sev = "ticket"
		}
		if i%3 == 0 {
			slo = "ttft"
		}
		a := Alert{Status: "firing", Fingerprint: fmt.Sprintf("%016x", i), StartsAt: at,
			Labels: map[string]string{"alertname": "A", "severity": sev, "sloth_slo": slo}}
		acc, err := s.AddNotification("pager-"+sev, sev, []Alert{a}, at)
		if err != nil || len(acc) != 1 {
			t.Fatalf("incident %d: %v %v", i, acc, err)
		}
		if sev == "page" {
			name := fmt.Sprintf("%016x.pb.gz", i)
			if err := os.WriteFile(filepath.Join(s.Dir(), ProfilesDir, name), []byte("pprof"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := s.AddProfile(acc[0].Incident, incident.Profile{File: ProfilesDir + "/" + name}, at); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 != 4 {
			a.Status, a.EndsAt = "resolved", at.Add(5*time.Minute)
			if _, err := s.AddNotification("pager-"+sev, sev, []Alert{a}, at.Add(5*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A page of the list holds PageSize incidents at most, newest first, those
// the filter takes; the pages together hold each once.
func TestListPagesNewestFirstWithFilters(t *testing.T) {
	s := open(t, t.TempDir())
	history(t, s, 230, start)
	for _, c := range []struct {
		f     Filter
		total int
	}{
		{Filter{}, 230},
		{Filter{Status: "firing"}, 46},
		{Filter{Status: "resolved"}, 184},
		{Filter{Severity: "page"}, 115},
		{Filter{SLO: "ttft"}, 77},
		{Filter{Status: "firing", Severity: "ticket", SLO: "ttft"}, 8}, // i ≡ 9 mod 30
		{Filter{SLO: "nope"}, 0},
	} {
		first := s.List(c.f, 1, PageSize)
		if first.Total != c.total || first.Pages != max(1, (c.total+PageSize-1)/PageSize) || first.Firing != 46 {
			t.Errorf("%+v: total %d, %d pages, %d firing; want %d, %d, 46", c.f, first.Total, first.Pages, first.Firing, c.total, (c.total+PageSize-1)/PageSize)
		}
		seen := map[string]bool{}
		var prev time.Time
		for n := 1; n <= first.Pages; n++ {
			p := s.List(c.f, n, PageSize)
			if len(p.Incidents) > PageSize || n < p.Pages && len(p.Incidents) != PageSize {
				t.Errorf("%+v page %d of %d: %d incidents", c.f, n, p.Pages, len(p.Incidents))
			}
			for _, inc := range p.Incidents {
				if seen[inc.ID] || !prev.IsZero() && inc.StartsAt.After(prev) {
					t.Fatalf("%+v page %d: %s again or out of order", c.f, n, inc.ID)
				}
				if c.f.Status != "" && inc.Status != c.f.Status || c.f.Severity != "" && inc.Severity != c.f.Severity || c.f.SLO != "" && inc.SLO != c.f.SLO {
					t.Fatalf("%+v took %+v", c.f, inc)
				}
				seen[inc.ID], prev = true, inc.StartsAt
			}
		}
		if len(seen) != c.total {
			t.Errorf("%+v: the pages hold %d incidents, want %d", c.f, len(seen), c.total)
		}
		if past := s.List(c.f, first.Pages+1, PageSize); len(past.Incidents) != 0 || past.Number <= past.Pages {
			t.Errorf("%+v: past the last page: %d incidents, page %d of %d", c.f, len(past.Incidents), past.Number, past.Pages)
		}
	}
}

func TestParseQuery(t *testing.T) {
	for _, c := range []struct {
		q    string
		f    Filter
		page int
		err  string
	}{
		{"", Filter{}, 1, ""},
		{"page=3&status=firing&severity=page&slo=ttft&other=x", Filter{"firing", "page", "ttft"}, 3, ""},
		{"page=0", Filter{}, 0, "from 1"},
		{"page=-2", Filter{}, 0, "from 1"},
		{"page=two", Filter{}, 0, "whole number"},
		{"page=99999999999999999999999", Filter{}, 0, "whole number"},
		{"page=1&page=2", Filter{}, 0, "once"},
		{"status=burning", Filter{}, 0, "firing or resolved"},
		{"slo=" + strings.Repeat("x", 300), Filter{}, 0, "at most 256"},
	} {
		q, _ := url.ParseQuery(c.q)
		f, page, err := ParseQuery(q)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%.40s: %v, want an error saying %q", c.q, err, c.err)
			}
			continue
		}
		if err != nil || f != c.f || page != c.page {
			t.Errorf("%s: %+v page %d %v", c.q, f, page, err)
		}
	}
	if p := open(t, t.TempDir()).List(Filter{}, math.MaxInt, PageSize); p.Number <= p.Pages || len(p.Incidents) != 0 {
		t.Errorf("the largest page number: %+v", p)
	}
}

// profileFiles lists the profiles directory.
func profileFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, ProfilesDir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, de := range des {
		out[de.Name()] = true
	}
	return out
}

// Retention drops resolved incidents past their time or past the newest
// MaxResolved, with their profile files unless a kept incident shares one,
// and firing ones not sent for longer than the retention; the journal after the restart holds only
// what is kept, a retry of a kept incident's notification is still a
// retry, and the next restart reads the same.
func TestRetentionDropsOldResolvedIncidentsAndTheirProfiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	history(t, s, 100, start) // incidents 0…99, a minute apart
	// A kept incident shares the profile of a dropped one.
	shared := Alert{Status: "firing", Fingerprint: "00000000000000ff", StartsAt: start.Add(200 * time.Minute), Labels: map[string]string{"alertname": "A", "severity": "page"}}
	acc, err := s.AddNotification("pager-page", "page", []Alert{shared}, shared.StartsAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddProfile(acc[0].Incident, incident.Profile{File: ProfilesDir + "/0000000000000000.pb.gz"}, shared.StartsAt); err != nil {
		t.Fatal(err)
	}
	// An orphan: a file no record names.
	os.WriteFile(filepath.Join(dir, ProfilesDir, "00000000000000ee.pb.gz"), []byte("pprof"), 0o644)
	s.Close()

	// Now is 3 h after the first resolve: incidents 0…54 resolved more
	// than 2 h ago (their last event at i+5 minutes), and of the rest only
	// the newest 20 resolved ones are kept.
	now := start.Add(3 * time.Hour)
	opts := Options{Retention: 2 * time.Hour, MaxResolved: 20, Now: func() time.Time { return now }}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Opened()
	kept := map[string]bool{IncidentID(&shared): true}
	resolvedKept := 0
	for i := 99; i >= 0; i-- {
		id := IncidentID(&Alert{Fingerprint: fmt.Sprintf("%016x", i), StartsAt: start.Add(time.Duration(i) * time.Minute)})
		switch {
		case i%5 == 4: // firing: kept if sent within the 2 h
			if i >= 60 {
				kept[id] = true
			}
		case i >= 55 && resolvedKept < 20:
			kept[id] = true
			resolvedKept++
		}
	}
	if !c.Ran || c.Err != nil || c.Kept != len(kept) || c.Dropped != 101-len(kept) {
		t.Fatalf("compaction on open: %+v, want %d kept and %d dropped", c, len(kept), 101-len(kept))
	}
	check := func(s *Store, when string) {
		t.Helper()
		incs := all(s)
		if len(incs) != len(kept) {
			t.Errorf("%s: %d incidents, want %d", when, len(incs), len(kept))
		}
		files := map[string]bool{}
		for _, inc := range incs {
			if !kept[inc.ID] {
				t.Errorf("%s: %s kept", when, inc.ID)
			}
			if inc.Profile != nil {
				files[strings.TrimPrefix(inc.Profile.File, ProfilesDir+"/")] = true
			}
		}
		if got := profileFiles(t, dir); !maps.Equal(got, files) {
			t.Errorf("%s: profile files %v, want those of the incidents kept %v", when, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(files)))
		}
		if n := journalLines(t, dir); n != len(kept) {
			t.Errorf("%s: journal has %d lines, want one per incident kept (%d)", when, n, len(kept))
		}
		if again, err := s.AddNotification("pager-page", "page", []Alert{shared}, now); err != nil || len(again) != 0 {
			t.Errorf("%s: a retry of a kept incident's notification is news: %v %v", when, again, err)
		}
	}
	check(s, "after the compaction")
	if files := profileFiles(t, dir); !files["0000000000000000.pb.gz"] || files["00000000000000ee.pb.gz"] {
		t.Errorf("the shared file went, or the orphan stayed: %v", files)
	}
	s.Close()
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Opened().Ran {
		t.Errorf("nothing to drop, yet compacted again: %+v", s.Opened())
	}
	check(s, "after the next restart")
}

// A firing incident whose resolve never came is dropped once Alertmanager
// has not sent it for the retention; one it still re-sends (a repeat, not
// a new notification) is kept however long it fires, across compactions.
func TestAStaleFiringIncidentIsDroppedAndARepeatedOneKept(t *testing.T) {
	dir := t.TempDir()
	const retention = 10 * 24 * time.Hour
	now := start
	opts := Options{Retention: retention, Now: func() time.Time { return now }}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	stale, alive := page("00000000000000a1"), page("00000000000000a2")
	if _, err := s.AddNotification("pager-page", "page", []Alert{stale, alive}, start); err != nil {
		t.Fatal(err)
	}
	// Alertmanager re-sends the one still firing every repeat_interval.
	for at := start.Add(4 * time.Hour); at.Before(start.Add(3 * retention)); at = at.Add(4 * time.Hour) {
		if got, err := s.AddNotification("pager-page", "page", []Alert{alive}, at); err != nil || len(got) != 0 {
			t.Fatalf("a repeat at %s: %+v %v", at, got, err)
		}
	}
	s.Close()
	for _, now = range []time.Time{start.Add(3 * retention), start.Add(3*retention + retention/10)} {
		s, err = Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if hasIncident(s, "00000000000000a1") || !hasIncident(s, "00000000000000a2") {
			t.Errorf("at %s: %d incidents (%+v), want only the one still sent", now, len(all(s)), all(s))
		}
		s.Close()
	}
	if n := journalLines(t, dir); n != 1 {
		t.Errorf("journal has %d lines, want the one snapshot", n)
	}
}

// The journal is compacted whenever it has doubled since the last
// compaction, so what a restart reads stays bounded by what is kept: a
// history ten times longer leaves a journal no larger.
func TestTheJournalStaysBoundedAsTheHistoryGrows(t *testing.T) {
	size := func(n int) (largest int64, compactions int) {
		dir := t.TempDir()
		opts := Options{MaxResolved: 50, compactFloor: 64 << 10, OnCompact: func(c Compaction) {
			if c.Err != nil {
				t.Error(c.Err)
			}
			compactions++
		}}
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			at := time.Now().Add(time.Duration(i-n) * time.Minute)
			a := Alert{Status: "firing", Fingerprint: fmt.Sprintf("%016x", i), StartsAt: at, Labels: map[string]string{"alertname": "A", "severity": "page", "sloth_slo": "s"}}
			if _, err := s.AddNotification("pager-page", "page", []Alert{a}, at); err != nil {
				t.Fatal(err)
			}
			a.Status, a.EndsAt = "resolved", at.Add(time.Minute)
			if _, err := s.AddNotification("pager-page", "page", []Alert{a}, at.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			largest = max(largest, s.size)
		}
		s.Close()
		s, err = Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := len(all(s)); got != 50 {
			t.Errorf("history of %d: %d incidents after a restart, want the newest 50", n, got)
		}
		return largest, compactions
	}
	short, _ := size(500)
	long, compactions := size(5000)
	t.Logf("largest journal for 500 incidents: %d bytes; for 5,000: %d bytes (%d compactions)", short, long, compactions)
	if compactions < 10 || long > short+short/10 {
		t.Errorf("largest journal for 5,000 incidents %d bytes, for 500 %d: compacted %d times", long, short, compactions)
	}
}

// A compaction cut short by a crash leaves its new journal beside the old
// one; the old one is the journal, and the leftover is removed.
func TestACompactionCutShortLeavesTheJournalWhole(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	history(t, s, 10, start)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, compactingName), []byte(`{"type":"incident","snap`), 0o644); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if n := len(all(s)); n != 10 || s.Skipped() != 0 {
		t.Errorf("%d incidents, %d lines skipped", n, s.Skipped())
	}
	if _, err := os.Stat(filepath.Join(dir, compactingName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover of a compaction is still there: %v", err)
	}
}

// A compaction whose rename cannot be made durable (the directory's fsync
// fails) leaves the new journal in use while a crash could bring back the
// old one: nothing more is acknowledged until a restart, and what was is
// all there after it.
func TestACompactionNotDurablyInPlaceStopsTheStore(t *testing.T) {
	dir := t.TempDir()
	var compactions []Compaction
	opts := Options{compactFloor: 1 << 10, OnCompact: func(c Compaction) { compactions = append(compactions, c) }}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.dirSync = func(string) error { return errors.New("input/output error") }
	acked := 0
	for len(compactions) == 0 {
		if _, err := s.AddNotification("pager-page", "page", []Alert{page(fmt.Sprintf("%016x", acked))}, start); err != nil {
			t.Fatalf("append %d, before any compaction: %v", acked, err)
		}
		acked++
	}
	if compactions[0].Err == nil {
		t.Fatalf("compaction with a failing directory fsync: %+v, want its error", compactions[0])
	}
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err == nil {
		t.Fatalf("an append after a compaction not durably in place was accepted: %+v", got)
	}
	s.Close()
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(all(s)); n != acked {
		t.Errorf("after the restart: %d incidents, want the %d acknowledged", n, acked)
	}
	if got, err := s.AddNotification("pager-page", "page", []Alert{page("00000000000000f1")}, start); err != nil || len(got) != 1 {
		t.Fatalf("after the restart: %+v %v", got, err)
	}
}

// A compaction replaces the journal: a second pager is still refused, the
// lock being on the new file before it is in place.
func TestASecondPagerIsRefusedAfterACompaction(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir, Options{MaxResolved: 5, compactFloor: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	history(t, first, 50, start)
	if first.base == 0 {
		t.Fatal("no compaction ran")
	}
	if second, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "in use by another pager") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second Open after a compaction: %v, want a refusal", err)
	}
}

// halfFile writes half of what it is given and fails, as a full disk does.
type halfFile struct{ profileFile }

func (h halfFile) Write(b []byte) (int, error) {
	n, _ := h.profileFile.Write(b[:len(b)/2])
	return n, errors.New("no space left on device")
}

// A profile cut off by a full disk leaves no file behind, neither under its
// name nor a temporary one; written whole, it is there whole; and a
// temporary file a crash left is gone after the next start.
func TestAProfileCutOffLeavesNoFileBehind(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	create := s.createProfile
	s.createProfile = func(name string) (profileFile, error) {
		f, err := create(name)
		return halfFile{f}, err
	}
	raw := bytes.Repeat([]byte("pprof "), 1000)
	if err := s.SaveProfile("00000000000000f1-1.pb.gz", raw); err == nil {
		t.Fatal("a profile cut off was saved")
	}
	if files := profileFiles(t, dir); len(files) != 0 {
		t.Errorf("a profile cut off left %v", slices.Sorted(maps.Keys(files)))
	}
	s.createProfile = create
	if err := s.SaveProfile("00000000000000f1-1.pb.gz", raw); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ProfilesDir, "00000000000000f1-1.pb.gz")); err != nil || !bytes.Equal(b, raw) {
		t.Errorf("the profile saved: %d bytes, %v; want %d", len(b), err, len(raw))
	}
	s.Close()

	if err := os.WriteFile(filepath.Join(dir, ProfilesDir, tempProfile("00000000000000f2-1.pb.gz")), raw[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	if files := profileFiles(t, dir); len(files) != 0 {
		t.Errorf("after a restart: %v, want the crash's temporary file gone (and the profile no record names)", slices.Sorted(maps.Keys(files)))
	}
}

// The creep scenario's ticket on Prometheus 3.16: the alert fired, cleared
// for one evaluation and fired again, and Alertmanager sent the second
// start's firing and resolve but never the first's resolve. The first
// incident must not stay firing for good; after a restart, nor either way
// round (the later start's notification stored first).
func TestAnAlertFiredAgainEndsItsEarlierIncident(t *testing.T) {
	for _, laterFirst := range []bool{false, true} {
		dir := t.TempDir()
		s := open(t, dir)
		first := page("00000000000000a1")
		first.Labels["severity"] = "ticket"
		second := first
		second.StartsAt = start.Add(20 * time.Second)
		order := []Alert{first, second}
		if laterFirst {
			order = []Alert{second, first}
		}
		for i, a := range order {
			if _, err := s.AddNotification("pager-ticket", "ticket", []Alert{a}, start.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		check := func(when string) {
			t.Helper()
			old, ok := s.Incident(IncidentID(&first))
			if !ok || old.Status != "resolved" || old.EndsAt == nil || !old.EndsAt.Equal(second.StartsAt) {
				t.Errorf("later first %v, %s: the earlier incident is %q ending %v, want resolved at the later start", laterFirst, when, old.Status, old.EndsAt)
			}
			if ev := old.Timeline[len(old.Timeline)-1]; ev.Kind != incident.Superseded || ev.By != IncidentID(&second) || !strings.Contains(ev.What(), IncidentID(&second)) {
				t.Errorf("later first %v, %s: its timeline ends %q", laterFirst, when, ev.What())
			}
			if now, _ := s.Incident(IncidentID(&second)); now.Status != "firing" {
				t.Errorf("later first %v, %s: the later incident is %q, want firing", laterFirst, when, now.Status)
			}
		}
		check("live")
		s.Close()
		s = open(t, dir)
		check("after a restart")
	}
}
