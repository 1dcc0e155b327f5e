// Package store keeps the pager's notifications durably: every accepted
// alert is appended to a JSONL file and fsynced before the webhook answers
// 2xx, so nothing Alertmanager was told is received can be lost, even to
// kill -9. The file is read back on start; incidents are derived from it.
//
// Resolved incidents are kept for a stated time and number, firing ones
// while Alertmanager still sends them (Options): the journal is compacted,
// rewritten as one snapshot line per incident kept, on start and whenever
// it has doubled, so what a restart reads stays bounded however long the
// history grows (see compact.go).
package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"burnlab/shared/amwebhook"
	"burnlab/shared/incident"
)

// Alert is one alert of an Alertmanager webhook body, as the journal keeps
// it: the wire type itself.
type Alert = amwebhook.Alert

// Record is one line of the journal: a notification of one alert, the
// profile captured for an incident when it paged, the one captured after
// it resolved, the facts read when it paged, or a snapshot of a whole
// incident, as compaction writes it.
type Record struct {
	Type     Kind              `json:"type"`
	At       time.Time         `json:"at"`
	Receiver string            `json:"receiver,omitempty"`
	Alert    *Alert            `json:"alert,omitempty"`
	Incident string            `json:"incident,omitempty"`
	Profile  *incident.Profile `json:"profile,omitempty"`
	// Facts are a page's facts, read when it fired.
	Facts *incident.Facts `json:"facts,omitempty"`
	// GCAfter is a page's GC share, read once it resolved.
	GCAfter *incident.GCAfter `json:"gc_after,omitempty"`
	// Severity is a notification's alert's when it has no severity label:
	// that of the webhook it came to (AddNotification).
	Severity string `json:"severity,omitempty"`
	// Snapshot is the incident as derived from the records compaction
	// replaced, and Seen the keys (dedupKey) of its notifications, so a
	// retry of one is still known for one.
	Snapshot *incident.Incident `json:"snapshot,omitempty"`
	Seen     []string           `json:"seen,omitempty"`
	// Heard is when a snapshot's incident was last re-sent (entry.heard).
	Heard *time.Time `json:"heard,omitempty"`
}

// NoAlertName is the name of an incident whose alert has no alertname
// label. Alertmanager does not require one (an alert posted to its API
// with only severity=page is routed like any other), so such an alert is
// stored, not refused: refusing it would drop its whole group.
const NoAlertName = "(no alertname)"

// AlertName is the name an alert's incident goes by: its alertname label,
// or NoAlertName.
func AlertName(a *Alert) string {
	if name := a.Labels["alertname"]; name != "" {
		return name
	}
	return NoAlertName
}

// IncidentID names the incident an alert belongs to.
func IncidentID(a *Alert) string {
	return fmt.Sprintf("%s-%d", a.Fingerprint, a.StartsAt.Unix())
}

// severity is a notification's alert's severity: its label's, or with
// none, its webhook's.
func (r *Record) severity() string {
	if sev := r.Alert.Labels["severity"]; sev != "" {
		return sev
	}
	return r.Severity
}

// Store is the journal and the incidents derived from it.
type Store struct {
	dir  string
	opts Options
	mu   sync.Mutex
	f    journal
	size int64 // of the journal's complete lines
	base int64 // of its snapshot lines: what the last compaction wrote
	// broken is why the store takes no more appends until restarted: an
	// append that failed and could not be cut back off, or a compaction
	// whose rename could not be made durable.
	broken error
	// seen holds the keys (dedupKey) of the notifications stored.
	seen      map[string]bool
	incidents map[string]*entry
	latest    map[string]*entry // by fingerprint: the incident with the latest start
	// order is every incident, the oldest first: by start, then by
	// arrival (seq).
	order []*entry
	seq   uint64
	// shares counts, per profile file, the incidents whose page-time or
	// after profile it is: pages within one capture window share one.
	shares  map[string]int
	skipped int
	cut     int64
	opened  Compaction // what Open's compaction did, if it ran
	// profiles is the directory of captured profiles. Names opened through
	// it cannot leave it, by "..", an absolute path or a symbolic link,
	// whatever a journal edited by hand says.
	profiles *os.Root
	// createProfile creates a file in profiles for SaveProfile, so a test
	// can make a write fail halfway.
	createProfile func(name string) (profileFile, error)
	// dirSync fsyncs a directory (syncDir), so a test can make it fail.
	dirSync func(dir string) error
}

// profileFile is the part of *os.File a profile is written with.
type profileFile interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

// entry is an incident and what the store keeps beside it.
type entry struct {
	inc  incident.Incident
	seq  uint64
	keys []string // of its notifications, in seen
	// heard is when Alertmanager last re-sent the firing alert, a repeat
	// not stored as a notification: journaled ("heard") at most every
	// half retention, so a page firing for longer than the retention is
	// not taken for one whose resolve never came (expired).
	heard time.Time
}

// journal is the part of *os.File the store writes with, so a test can make
// an append fail halfway.
type journal interface {
	Write([]byte) (int, error)
	Sync() error
	Truncate(int64) error
	Close() error
}

const journalName = "notifications.jsonl"

// Open reads dir's journal, if any, and opens it for appending; opts say
// what it keeps of resolved incidents.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, ProfilesDir), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{dir: dir, opts: opts.withDefaults(), seen: map[string]bool{}, incidents: map[string]*entry{}, latest: map[string]*entry{}, shares: map[string]int{}, dirSync: syncDir}
	path := filepath.Join(dir, journalName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	// Two pagers appending to one journal would interleave their records
	// and each cut the other's line as torn. The lock goes with the file
	// descriptor, so kill -9 releases it.
	if err := lock(f); err != nil {
		f.Close()
		return nil, err
	}
	// A compaction replaces the journal by renaming a new file, locked
	// before, over it: a pager that opened the old one and got its lock
	// once the other let go holds a file no longer in the directory.
	if fi, err := f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("store: %w", err)
	} else if now, err := os.Stat(path); err != nil || !os.SameFile(fi, now) {
		f.Close()
		return nil, fmt.Errorf("store: %s is in use by another pager, which replaced it: give each pager its own -data directory", path)
	}
	// What a compaction cut short left; the lock says none is running.
	if err := os.Remove(filepath.Join(dir, compactingName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: reading %s: %w", path, err)
	}
	// A crash in the middle of a write leaves the start of a record without
	// its newline. That record was never acknowledged (the answer waits for
	// the fsync of the whole line), but the next one appended would be glued
	// onto it and the pair skipped on the next read: an acknowledged
	// notification lost. So the journal is cut back to its last complete
	// line, durably, before anything is appended.
	end := bytes.LastIndexByte(b, '\n') + 1
	if end < len(b) {
		if len(bytes.TrimSpace(b[end:])) > 0 {
			s.skipped++
		}
		s.cut = int64(len(b) - end)
		if err := f.Truncate(int64(end)); err != nil {
			f.Close()
			return nil, fmt.Errorf("store: cutting the torn last line of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("store: fsync %s: %w", path, err)
		}
	}
	for line := range bytes.SplitSeq(b[:end], []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			// Not written by this pager as a whole line (an edit by hand, a
			// damaged disk): counted and reported, the rest still read.
			s.skipped++
			continue
		}
		if r.Type == KindIncident {
			s.base += int64(len(line)) + 1
		}
		s.apply(r)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	if s.profiles, err = os.OpenRoot(filepath.Join(dir, ProfilesDir)); err != nil {
		f.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	s.createProfile = func(name string) (profileFile, error) {
		return s.profiles.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	}
	s.f, s.size = f, int64(end)
	if err := s.sweep(); err != nil {
		s.Close()
		return nil, err
	}
	if s.due() || len(s.expired(s.opts.Now())) > 0 {
		s.opened = s.compact()
	}
	return s, nil
}

func lock(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("store: %s is in use by another pager: give each pager its own -data directory", f.Name())
		}
		return fmt.Errorf("store: locking %s: %w", f.Name(), err)
	}
	return nil
}

// Opened reports the compaction Open ran, if it ran one (Ran).
func (s *Store) Opened() Compaction { return s.opened }

// Skipped reports journal lines that could not be read on open, a torn
// last line included.
func (s *Store) Skipped() int { return s.skipped }

// Cut reports the bytes of a torn last line cut off the journal on open.
func (s *Store) Cut() int64 { return s.cut }

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// ProfilesDir is where captured profiles are kept, as "profiles/<name>"
// relative to the data directory (incident.Profile.File).
const ProfilesDir = "profiles"

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", dir, err)
	}
	return nil
}

// Close closes the journal and the profiles directory.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.f.Close(), s.profiles.Close())
}

func dedupKey(a *Alert) string {
	return a.Fingerprint + "|" + a.Status + "|" + a.StartsAt.UTC().Format(time.RFC3339Nano)
}

// Accepted is one alert of a notification that was new, not a retry.
type Accepted struct {
	Alert    Alert
	Incident string
	// Severity is the alert's severity label or, with none, its webhook's.
	Severity string
	// Fired is true for the first firing notification of an alert the
	// pager diagnoses: a page or a ticket (Diagnosed).
	Fired bool
	// Cleared is true for the first resolved notification of one the
	// pager saw fire: the moment for the "after" profile.
	Cleared bool
}

// Diagnosed says whether the pager diagnoses alerts of a severity: pages,
// and tickets, the slow burns that come a day before a page would (the
// write-up's three days): each gets a profile when it fires and after it
// resolves, and its facts. The facts' heap verdict needs a delta profile
// from before the burn, and the pager keeps the last -delta-keep of them
// (20 minutes by default): a ticket whose burn began longer ago says it
// has none. Other severities are kept and listed, not diagnosed.
func Diagnosed(severity string) bool { return severity == "page" || severity == "ticket" }

// AddNotification appends the payload's new alerts and fsyncs them before
// it returns; alerts seen before (Alertmanager's retries and repeats, same
// fingerprint, status and start) are dropped. It returns the new ones.
// endpoint is the webhook the payload came to, "page" or "ticket": the
// severity of an alert without a severity label, since Alertmanager's
// route sent it there as one.
func (s *Store) AddNotification(receiver, endpoint string, alerts []Alert, now time.Time) ([]Accepted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	var added []Record
	var out []Accepted
	// batchFired and batchResolved are the incidents this notification
	// fires and resolves: an alert may fire and resolve within one.
	batch, batchFired, batchResolved, batchHeard := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := range alerts {
		a := alerts[i]
		key := dedupKey(&a)
		if s.seen[key] || batch[key] {
			// A repeat of a firing alert: the incident is alive.
			if e := s.incidents[IncidentID(&a)]; e != nil && a.Status == "firing" && e.inc.Status == "firing" &&
				now.Sub(e.heardAt()) > s.opts.Retention/2 && !batchHeard[e.inc.ID] {
				batchHeard[e.inc.ID] = true
				r := Record{Type: KindHeard, At: now, Incident: e.inc.ID}
				line, err := json.Marshal(r)
				if err != nil {
					return nil, fmt.Errorf("store: %w", err)
				}
				buf.Write(append(line, '\n'))
				added = append(added, r)
			}
			continue
		}
		batch[key] = true
		r := Record{Type: KindNotification, At: now, Receiver: receiver, Alert: &a}
		if a.Labels["severity"] == "" {
			r.Severity = endpoint
		}
		severity := r.severity()
		line, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		buf.Write(append(line, '\n'))
		added = append(added, r)
		id := IncidentID(&a)
		e, known := s.incidents[id]
		diagnosed := Diagnosed(severity)
		acc := Accepted{Alert: a, Incident: id, Severity: severity,
			Fired:   a.Status == "firing" && diagnosed && !known && !batchFired[id],
			Cleared: a.Status == "resolved" && diagnosed && (known && e.inc.Status != "resolved" || batchFired[id]) && !batchResolved[id]}
		out = append(out, acc)
		batchFired[id] = batchFired[id] || acc.Fired
		batchResolved[id] = batchResolved[id] || a.Status == "resolved"
	}
	if len(added) == 0 {
		return nil, nil
	}
	if err := s.write(buf.Bytes()); err != nil {
		return nil, err
	}
	for _, r := range added {
		s.apply(r)
	}
	s.compactIfDue()
	return out, nil
}

// Kind is a journal record's type.
type Kind string

// The kinds of journal record. Their strings are in every journal
// written, so they never change.
const (
	// KindNotification is one alert of a webhook notification.
	KindNotification Kind = "notification"
	// KindProfile and KindProfileAfter are a page's profile, taken when
	// it fired and after it resolved.
	KindProfile      Kind = "profile"
	KindProfileAfter Kind = "profile_after"
	// KindFacts is the facts read when a page fired (incident.Facts).
	KindFacts Kind = "facts"
	// KindGCAfter is the collector's share read once a page resolved
	// (incident.GCAfter).
	KindGCAfter Kind = "gc_after"
	// KindHeard is a re-sent notification of an incident a compaction
	// kept as a snapshot: heard again, nothing new.
	KindHeard Kind = "heard"
	// KindIncident is a compaction's snapshot of a whole incident.
	KindIncident Kind = "incident"
)

// AddProfile records the profile captured for an incident when it paged.
func (s *Store) AddProfile(id string, p incident.Profile, now time.Time) error {
	return s.addProfile(KindProfile, id, p, now)
}

// AddAfterProfile records the profile captured after an incident resolved.
func (s *Store) AddAfterProfile(id string, p incident.Profile, now time.Time) error {
	return s.addProfile(KindProfileAfter, id, p, now)
}

func (s *Store) addProfile(typ Kind, id string, p incident.Profile, now time.Time) error {
	return s.add1(Record{Type: typ, At: now, Incident: id, Profile: &p})
}

// AddGCAfter records the collector's share read once an incident resolved.
func (s *Store) AddGCAfter(id string, g incident.GCAfter, now time.Time) error {
	return s.add1(Record{Type: KindGCAfter, At: now, Incident: id, GCAfter: &g})
}

// AddFacts records the facts read for an incident when it paged; the
// delta profiles they name are saved (SaveProfile) before.
func (s *Store) AddFacts(id string, f incident.Facts, now time.Time) error {
	return s.add1(Record{Type: KindFacts, At: now, Incident: id, Facts: &f})
}

// add1 appends one record, fsynced, and applies it.
func (s *Store) add1(r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := s.write(append(line, '\n')); err != nil {
		return err
	}
	s.apply(r)
	s.compactIfDue()
	return nil
}

// write appends whole lines and fsyncs them; the caller holds s.mu.
func (s *Store) write(b []byte) error {
	if s.broken != nil {
		return fmt.Errorf("store: refusing to append until restarted: %w", s.broken)
	}
	if _, err := s.f.Write(b); err != nil {
		return s.undo(fmt.Errorf("store: append: %w", err))
	}
	if err := s.f.Sync(); err != nil {
		return s.undo(fmt.Errorf("store: fsync: %w", err))
	}
	s.size += int64(len(b))
	return nil
}

// undo cuts a failed append (a disk full halfway through a line, say) back
// off the journal: it is not acknowledged, and a fragment left there would
// swallow the next record, which is. If even that fails the store takes no
// more writes, so nothing more is acknowledged, until a restart cuts the
// fragment on open.
func (s *Store) undo(err error) error {
	if terr := s.f.Truncate(s.size); terr != nil {
		s.broken = errors.Join(err, fmt.Errorf("store: cutting it back off: %w", terr))
		return s.broken
	}
	return err
}

// apply folds one record into the incidents; the caller holds s.mu (or
// owns s, while opening).
func (s *Store) apply(r Record) {
	switch r.Type {
	case KindNotification:
		a := r.Alert
		if a == nil {
			return
		}
		key := dedupKey(a)
		id := IncidentID(a)
		e := s.incidents[id]
		if e == nil {
			e = s.add(incident.Incident{ID: id, AlertName: AlertName(a), SLO: a.Labels["sloth_slo"], Severity: r.severity(),
				StartsAt: a.StartsAt, Labels: a.Labels})
			if a.Status == "firing" {
				e.inc.BurnRate = a.Annotations["burn_rate"]
			}
		}
		if !s.seen[key] {
			s.seen[key] = true
			e.keys = append(e.keys, key)
		}
		inc := &e.inc
		inc.Annotations = a.Annotations
		inc.Status = a.Status
		kind := incident.Firing
		if a.Status == "resolved" {
			kind = incident.Resolved
			end := a.EndsAt
			inc.EndsAt = &end
		}
		inc.Timeline = append(inc.Timeline, incident.Event{At: r.At, Kind: kind, Receiver: r.Receiver, BurnRate: a.Annotations["burn_rate"]})
		s.supersede(e)
	case KindProfile, KindProfileAfter:
		e := s.incidents[r.Incident]
		if e == nil || r.Profile == nil {
			return
		}
		inc := &e.inc
		p := *r.Profile
		if p.TakenAt.IsZero() {
			p.TakenAt = r.At
		}
		ev := incident.Event{At: r.At, Kind: incident.ProfileTaken, Error: p.Error}
		slot := &inc.Profile
		if r.Type == KindProfileAfter {
			slot, ev.Kind = &inc.After, incident.ProfileAfter
		}
		for _, file := range recordFiles(*slot) {
			s.share(file, -1)
		}
		*slot = &p
		for _, file := range recordFiles(&p) {
			s.share(file, 1)
		}
		if p.Error == "" && len(p.Top) > 0 {
			ev.Top = &p.Top[0]
		}
		inc.Timeline = append(inc.Timeline, ev)
	case KindFacts:
		e := s.incidents[r.Incident]
		if e == nil || r.Facts == nil {
			return
		}
		for _, file := range heapFiles(e.inc.Facts) {
			s.share(file, -1)
		}
		f := *r.Facts
		e.inc.Facts = &f
		for _, file := range heapFiles(&f) {
			s.share(file, 1)
		}
		e.inc.Timeline = append(e.inc.Timeline, incident.Event{At: r.At, Kind: incident.FactsRead, Note: f.Summary()})
	case KindGCAfter:
		e := s.incidents[r.Incident]
		if e == nil || r.GCAfter == nil {
			return
		}
		g := *r.GCAfter
		e.inc.GCAfter = &g
		e.inc.Timeline = append(e.inc.Timeline, incident.Event{At: r.At, Kind: incident.GCAfterRead, Note: g.Words})
	case KindHeard:
		if e := s.incidents[r.Incident]; e != nil && r.At.After(e.heard) {
			e.heard = r.At
		}
	case KindIncident:
		if r.Snapshot == nil || r.Snapshot.ID == "" || s.incidents[r.Snapshot.ID] != nil {
			return
		}
		e := s.add(*r.Snapshot)
		if r.Heard != nil {
			e.heard = *r.Heard
		}
		for _, key := range r.Seen {
			if !s.seen[key] {
				s.seen[key] = true
				e.keys = append(e.keys, key)
			}
		}
		for _, file := range files(&e.inc) {
			s.share(file, 1)
		}
		s.supersede(e)
	}
}

// add makes inc an incident of the store, in its place in order.
func (s *Store) add(inc incident.Incident) *entry {
	s.seq++
	e := &entry{inc: inc, seq: s.seq}
	s.incidents[inc.ID] = e
	i, _ := slices.BinarySearchFunc(s.order, e, func(a, b *entry) int {
		if c := a.inc.StartsAt.Compare(b.inc.StartsAt); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	s.order = slices.Insert(s.order, i, e)
	return e
}

// supersede ends a firing incident that Alertmanager has replaced; it
// runs once e's record is applied.
// Alertmanager holds one alert per fingerprint: an alert that clears and
// fires again within a group interval comes back with a later start, and
// the resolve of the earlier start may never be sent. An incident is its
// fingerprint and start, so that earlier one would stay firing in the
// pager for good. Whichever of the two arrives second, the earlier one,
// if still firing, is resolved at the later one's start, and its timeline
// says why. Replaying the journal does the same, so nothing is journaled.
func (s *Store) supersede(e *entry) {
	fp := fingerprintOf(e.inc.ID)
	prev := s.latest[fp]
	if prev == nil || prev == e {
		s.latest[fp] = e
		return
	}
	older, newer := prev, e
	if e.inc.StartsAt.Before(prev.inc.StartsAt) {
		older, newer = e, prev
	}
	s.latest[fp] = newer
	if !newer.inc.StartsAt.After(older.inc.StartsAt) || older.inc.Status != "firing" {
		return
	}
	end := newer.inc.StartsAt
	older.inc.Status, older.inc.EndsAt = "resolved", &end
	older.inc.Timeline = append(older.inc.Timeline, incident.Event{At: end, Kind: incident.Superseded, By: newer.inc.ID})
}

// fingerprintOf is the fingerprint part of an incident ID (IncidentID).
func fingerprintOf(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 {
		return id[:i]
	}
	return id
}

// files are the profile files an incident names: its page-time and after
// profiles' and the flight-recorder snapshots taken with them, and its
// facts' delta profiles.
func files(inc *incident.Incident) []string {
	out := append(recordFiles(inc.Profile), recordFiles(inc.After)...)
	return append(out, heapFiles(inc.Facts)...)
}

// recordFiles are the files of a profile record: the profile's, the
// flight-recorder snapshot's taken with it, and its other kinds'.
func recordFiles(p *incident.Profile) []string {
	var out []string
	if p != nil && p.File != "" {
		out = append(out, p.File)
	}
	if p != nil && p.Trace != nil && p.Trace.File != "" {
		out = append(out, p.Trace.File)
	}
	if p != nil {
		for _, k := range p.Kinds {
			if k.File != "" {
				out = append(out, k.File)
			}
		}
	}
	return out
}

// heapFiles are the delta profiles facts name.
func heapFiles(f *incident.Facts) []string {
	if f == nil || f.Heap == nil {
		return nil
	}
	var out []string
	for _, file := range []string{f.Heap.BeforeFile, f.Heap.DuringFile} {
		if file != "" {
			out = append(out, file)
		}
	}
	return out
}

// share counts one incident more (n 1) or fewer (-1) using a profile file.
func (s *Store) share(file string, n int) {
	if file == "" {
		return
	}
	if s.shares[file] += n; s.shares[file] <= 0 {
		delete(s.shares, file)
	}
}

// Shares is how many incidents use the profile file: as their page-time
// profile, the one after the resolve, or a delta profile of their facts.
func (s *Store) Shares(file string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shares[file]
}

// Incident returns one incident by id.
func (s *Store) Incident(id string) (incident.Incident, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.incidents[id]
	if !ok {
		return incident.Incident{}, false
	}
	return e.copy(), true
}

// copy is the incident for a caller: its timeline is its own.
func (e *entry) copy() incident.Incident {
	c := e.inc
	c.Timeline = slices.Clone(e.inc.Timeline)
	return c
}

// SaveProfile writes a captured profile durably as name in the profiles
// directory, before the journal names it: to a temporary file beside it
// (tempProfile), fsynced, then renamed over name and the directory
// fsynced. A full disk or a crash midway leaves no cut-off profile under
// name, only the temporary file, which is removed at once or, after a
// crash, by the next Open.
func (s *Store) SaveProfile(name string, b []byte) error {
	if !filepath.IsLocal(name) || strings.ContainsRune(name, '/') {
		return fmt.Errorf("store: profile name %q is not a file name", name)
	}
	tmp := tempProfile(name)
	f, err := s.createProfile(tmp)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.profiles.Rename(tmp, name)
	}
	if err != nil {
		if rerr := s.profiles.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("store: writing profile %s: %w", name, err)
	}
	d, err := s.profiles.Open(".")
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", ProfilesDir, err)
	}
	return nil
}

// tempProfile is the name a profile is written under before it is whole.
func tempProfile(name string) string { return "." + name + ".tmp" }

// OpenProfile opens an incident's profile file, which comes from the
// journal read back from disk: only a regular file inside the profiles
// directory, whatever the journal says.
func (s *Store) OpenProfile(file string) (*os.File, os.FileInfo, error) {
	name, ok := strings.CutPrefix(file, ProfilesDir+"/")
	if !ok || !filepath.IsLocal(name) {
		return nil, nil, fmt.Errorf("profile file %q is not in %s/", file, ProfilesDir)
	}
	f, err := s.profiles.Open(name)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("profile file %q is not a regular file", file)
	}
	return f, fi, nil
}

// ValidFingerprint says whether fp is one Alertmanager sends: a label
// set's 64-bit hash as 16 lowercase hex digits. Nothing else is taken,
// because the fingerprint names the incident and the incident names its
// profile's file.
func ValidFingerprint(fp string) bool {
	if len(fp) != 16 {
		return false
	}
	for _, c := range []byte(fp) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
