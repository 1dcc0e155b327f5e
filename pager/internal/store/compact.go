package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Retention: a resolved incident is kept DefaultRetention after its last
// event, and only the DefaultMaxResolved newest resolved ones are kept at
// all. A firing incident is kept while Alertmanager still sends it: it
// re-sends a firing alert every repeat_interval (4h here), so one neither
// changed nor re-sent (entry.heard) for the retention is stale, its
// resolve lost, and is dropped too. Past that an incident is dropped,
// with its profiles when no incident kept shares them.
//
// Retention is applied by compaction: the journal is rewritten as one
// snapshot record ("incident") per incident kept, the notification and
// profile records it was derived from gone. Compaction runs on Open when
// anything is to be dropped or the journal is due, and after an append that
// makes it due: more than twice the snapshot the last compaction wrote, and
// more than compactFloor. So the journal a restart reads is at most about
// twice the snapshot of what is kept, and the work of compacting is paid
// for by as many bytes appended since: a history of 50,000 incidents
// restarts as fast as one of 10,000.
const (
	DefaultRetention   = 30 * 24 * time.Hour
	DefaultMaxResolved = 10000
	compactFloor       = 4 << 20
)

// compactingName is the new journal while a compaction writes it.
const compactingName = journalName + ".compacting"

// Options are what a store keeps; zero fields take the defaults.
type Options struct {
	// Retention is how long a resolved incident is kept after its last
	// event, and a firing one after Alertmanager last sent it; default
	// DefaultRetention.
	Retention time.Duration
	// MaxResolved is how many resolved incidents are kept at most, the
	// newest by start; default DefaultMaxResolved.
	MaxResolved int
	// Now is the clock retention is measured by; default time.Now.
	Now func() time.Time
	// OnCompact hears of each compaction after Open's (Opened reports
	// that one), with the store locked: it may log, not call the store.
	OnCompact func(Compaction)
	// compactFloor is the journal size below which it is not compacted
	// but to drop something; default compactFloor (tests set it lower).
	compactFloor int64
}

func (o Options) withDefaults() Options {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxResolved <= 0 {
		o.MaxResolved = DefaultMaxResolved
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.compactFloor <= 0 {
		o.compactFloor = compactFloor
	}
	return o
}

// Compaction is what one compaction did.
type Compaction struct {
	Ran           bool
	Dropped, Kept int   // incidents
	Files         int   // profile files removed
	Before, After int64 // journal bytes
	Took          time.Duration
	// Err is why it failed. A failed write leaves the journal as it was;
	// a failed fsync of the directory after the rename leaves the new one
	// in use, and the store taking no appends until restarted.
	Err error
}

// due says whether the journal has grown enough since the last compaction
// to be compacted; the caller holds s.mu.
func (s *Store) due() bool {
	return s.size > s.opts.compactFloor && s.size > 2*s.base
}

// compactIfDue compacts when due and tells OnCompact; the caller holds
// s.mu. A failure leaves the journal as it was: the appends acknowledged
// are in it, and the next append that finds it due tries again.
func (s *Store) compactIfDue() {
	if !s.due() || s.broken != nil {
		return
	}
	c := s.compact()
	if s.opts.OnCompact != nil {
		s.opts.OnCompact(c)
	}
}

// expired returns the incidents retention drops at now; the caller holds
// s.mu.
func (s *Store) expired(now time.Time) map[*entry]bool {
	drop := map[*entry]bool{}
	kept := 0
	for _, e := range slices.Backward(s.order) {
		if e.inc.Status != "resolved" {
			if now.Sub(e.heardAt()) > s.opts.Retention {
				drop[e] = true
			}
			continue
		}
		if kept >= s.opts.MaxResolved || now.Sub(e.last()) > s.opts.Retention {
			drop[e] = true
			continue
		}
		kept++
	}
	return drop
}

// heardAt is when Alertmanager last sent the incident: its last change,
// or the last repeat journaled after it.
func (e *entry) heardAt() time.Time {
	if t := e.last(); t.After(e.heard) {
		return t
	}
	return e.heard
}

// last is when the incident last changed: its latest event, or its start.
func (e *entry) last() time.Time {
	t := e.inc.StartsAt
	for _, ev := range e.inc.Timeline {
		if ev.At.After(t) {
			t = ev.At
		}
	}
	return t
}

// compact drops what retention no longer keeps and rewrites the journal as
// a snapshot of the rest; the caller holds s.mu (or owns s, while
// opening). The new journal is written beside the old one, fsynced, locked
// and renamed over it, and the directory fsynced: a crash at any point
// leaves one journal or the other, whole. Only then are the dropped
// incidents' profile files removed.
func (s *Store) compact() Compaction {
	begin := time.Now()
	c := Compaction{Ran: true, Before: s.size}
	drop := s.expired(s.opts.Now())
	f, n, err := s.writeSnapshot(drop)
	if err != nil {
		c.Err, c.After = err, s.size
		return c
	}
	old := s.f
	s.f, s.size, s.base = f, n, n
	old.Close()
	synced := s.dirSync(s.dir)
	c.Err, c.After = synced, n
	if synced != nil {
		// s.f is the new journal, but a crash could still bring back the
		// old directory entry, without whatever is appended from now on.
		// So nothing more is acknowledged (the webhook answers 503, and
		// Alertmanager retries) until a restart, whose Open syncs the
		// directory before it appends.
		s.broken = fmt.Errorf("store: compacted journal not durably in place: %w", synced)
	}

	var gone []string
	for e := range drop {
		delete(s.incidents, e.inc.ID)
		if fp := fingerprintOf(e.inc.ID); s.latest[fp] == e {
			delete(s.latest, fp)
		}
		for _, key := range e.keys {
			delete(s.seen, key)
		}
		for _, file := range files(&e.inc) {
			s.share(file, -1)
			if s.shares[file] == 0 {
				gone = append(gone, file)
			}
		}
	}
	s.order = slices.DeleteFunc(s.order, func(e *entry) bool { return drop[e] })
	c.Dropped, c.Kept = len(drop), len(s.order)
	// Were the rename not durable, a crash could bring back the old
	// journal, which names these files: they stay until the next time.
	if synced == nil {
		for _, file := range gone {
			if name, ok := strings.CutPrefix(file, ProfilesDir+"/"); ok && filepath.IsLocal(name) && s.profiles.Remove(name) == nil {
				c.Files++
			}
		}
	}
	c.Took = time.Since(begin)
	return c
}

// writeSnapshot writes the incidents kept to a new journal, fsynced,
// locked and renamed over the old one, and returns it with its size.
func (s *Store) writeSnapshot(drop map[*entry]bool) (*os.File, int64, error) {
	path := filepath.Join(s.dir, compactingName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("store: compacting: %w", err)
	}
	fail := func(err error) (*os.File, int64, error) {
		f.Close()
		os.Remove(path)
		return nil, 0, fmt.Errorf("store: compacting: %w", err)
	}
	if err := lock(f); err != nil {
		return fail(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	now := s.opts.Now()
	for _, e := range s.order {
		if drop[e] {
			continue
		}
		r := Record{Type: KindIncident, At: now, Incident: e.inc.ID, Snapshot: &e.inc, Seen: e.keys}
		if !e.heard.IsZero() {
			r.Heard = &e.heard
		}
		line, err := json.Marshal(r)
		if err != nil {
			return fail(err)
		}
		w.Write(append(line, '\n'))
		n += int64(len(line)) + 1
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(path, filepath.Join(s.dir, journalName)); err != nil {
		return fail(err)
	}
	return f, n, nil
}

// sweep removes the profile files no incident names: those of incidents a
// crash dropped before their files went, a capture's whose record was
// never written, a write's a crash cut short (tempProfile). Only names the
// pager writes are touched. The caller owns s (Open).
func (s *Store) sweep() error {
	files, err := fs.ReadDir(s.profiles.FS(), ".")
	if err != nil {
		return fmt.Errorf("store: reading %s: %w", ProfilesDir, err)
	}
	for _, f := range files {
		name := f.Name()
		temp := strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")
		if !f.Type().IsRegular() || s.shares[ProfilesDir+"/"+name] > 0 || !strings.HasSuffix(name, ".pb.gz") && !strings.HasSuffix(name, ".trace") && !temp {
			continue
		}
		if err := s.profiles.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: removing %s: %w", name, err)
		}
	}
	return nil
}
