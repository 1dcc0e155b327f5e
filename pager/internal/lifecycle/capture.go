package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/shared/incident"
)

// capture is what an alert of a notification starts: the page-time
// capture of a new page or ticket (shot, and done, closed once it is recorded), or,
// for its resolve, the one after (after, and pending, the page-time
// capture it waits for, if that is still running).
type capture struct {
	shot    *shot
	done    chan struct{}
	after   bool
	pending chan struct{}
}

// register decides the captures of a notification's new alerts; the
// caller holds l.ordering, from storing the notification on. A resolve
// whose page's capture was not registered yet would find none to wait for
// and, the page having no profile yet, take none after.
func (l *Lifecycle) register(accepted []store.Accepted) []capture {
	out := make([]capture, len(accepted))
	if len(l.rules.Rules) == 0 {
		return out
	}
	for i, a := range accepted {
		if a.Fired {
			// Joined here, in the order the pages arrived.
			out[i].shot, out[i].done = l.join(a, "page", l.clock.Now()), make(chan struct{})
			l.mu.Lock()
			l.pageCaptures[a.Incident] = out[i].done
			l.mu.Unlock()
		}
		if a.Cleared {
			l.mu.Lock()
			out[i].after, out[i].pending = true, l.pageCaptures[a.Incident]
			l.mu.Unlock()
		}
	}
	return out
}

// profileName is the file a page's profile is kept in, under the profiles
// directory: made only of the alert's validated fingerprint, its start and
// a fixed suffix ("" at page time, "-after" once resolved).
func profileName(a store.Alert, suffix string) (string, error) {
	if !store.ValidFingerprint(a.Fingerprint) {
		return "", fmt.Errorf("no profile file for fingerprint %.40q", a.Fingerprint)
	}
	return fmt.Sprintf("%s-%d%s.pb.gz", a.Fingerprint, a.StartsAt.Unix(), suffix), nil
}

// A shot is one fetch of the heap profiles of a rule's processes (see
// package targets), shared by every capture of that rule it serves. A capture asked for at time t is served by the newest
// shot if that starts no earlier than t, or, for a page-time profile, no
// earlier than one window before t: allocations counted since the
// gateway's process started change little within a window. A profile after
// a resolve must be taken after it, so it never takes an older shot.
// Otherwise a new shot is made; it starts at t, or, within the window of the
// newest, once that window ends. So at most one fetch per rule starts per
// window, however many pages and resolves arrive, and a storm's captures
// cost each process one profile each window.
type shot struct {
	at   time.Time // when its fetch starts
	name string    // its file, named after the capture that made it
	kind string    // "page" or "after": that capture's
	rule *targets.Rule
	done chan struct{}
	p    incident.Profile // set before done is closed
}

// join returns the shot that serves a capture for a at now, making one if
// none does. An alert that no rule takes, or whose file cannot be named,
// gets a shot that is done already and says why.
func (l *Lifecycle) join(a store.Accepted, kind string, now time.Time) *shot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &shot{at: now, kind: kind, done: make(chan struct{})}
	suffix := ""
	if kind == "after" {
		suffix = "-after"
	}
	rule, err := l.rules.Match(a.Alert.Labels)
	if err == nil {
		s.name, err = profileName(a.Alert, suffix)
	}
	if err != nil {
		s.p = incident.Profile{Error: err.Error(), TakenAt: time.Now()}
		close(s.done)
		return s
	}
	window := l.cfg.ProfileWindow
	last := l.last[rule.Name]
	if l := last; l != nil && (!l.at.Before(now) || kind == "page" && now.Sub(l.at) < window) {
		return l
	}
	if l := last; l != nil && now.Sub(l.at) < window {
		s.at = l.at.Add(window)
	}
	s.rule, l.last[rule.Name] = rule, s
	l.captures.Go(func() { l.take(s, a.Incident) })
	return s
}

// take waits for the shot's start and a free fetch, and fetches.
func (l *Lifecycle) take(s *shot, by string) {
	defer close(s.done)
	if wait := s.at.Sub(l.clock.Now()); wait > 0 && l.clock.Sleep(l.waits, wait) != nil {
		s.p = incident.Profile{Error: "the pager stopped before the capture's window came", TakenAt: time.Now()}
		return
	}
	select {
	case l.fetching <- struct{}{}:
		defer func() { <-l.fetching }()
	case <-l.captureCtx.Done():
		s.p = incident.Profile{Error: "the pager stopped before the capture's turn came", TakenAt: time.Now()}
		return
	}
	// The whole capture has a deadline: a rule of many processes that
	// hang, fetched a few at a time, must not hold its turn for long.
	ctx, cancel := context.WithTimeout(l.captureCtx, l.captureFor(s.rule))
	defer cancel()
	p, ts, err := l.fetch(ctx, s.rule, s.name)
	var tr *incident.Trace
	if s.rule.TraceURL != "" {
		// Right after the heap profile, on a timeout of its own: the two
		// look at the same seconds, and one failing keeps the other.
		tctx, cancel := context.WithTimeout(l.captureCtx, l.cfg.ProfileTimeout)
		tr = l.snapshot(tctx, s.rule.TraceURL, s.name)
		cancel()
		if tr.Error != "" {
			l.cfg.Log.Error().Str("error", tr.Error).Str("incident", by).Str("when", s.kind).Msg("flight-recorder snapshot not taken or not split")
		}
	}
	if err == nil {
		p.Kinds = l.kinds(ctx, s.rule, ts, s.name)
	}
	if err != nil {
		l.fetches.WithLabelValues("error").Inc()
		l.cfg.Log.Error().Err(err).Str("incident", by).Str("when", s.kind).Msg("profile capture failed")
		s.p = incident.Profile{Error: err.Error(), TakenAt: time.Now(), Trace: tr, Rule: s.rule.Name, Instances: p.Instances}
		return
	}
	p.Trace = tr
	l.fetches.WithLabelValues("ok").Inc()
	msg, ev := "PROFILE top alloc_space at page time", l.cfg.Log.Warn()
	if s.kind == "after" {
		msg, ev = "PROFILE top alloc_space after resolve", l.cfg.Log.Info()
	}
	ev = ev.Str("incident", by).Str("rule", p.Rule).Int64("total_bytes", p.Total).Str("file", p.File)
	if n := len(p.Instances); n > 0 {
		ok := 0
		for _, in := range p.Instances {
			if in.Error == "" {
				ok++
			}
		}
		ev = ev.Int("instances", n).Int("instances_failed", n-ok)
	}
	for i, e := range p.Top[:min(3, len(p.Top))] {
		ev = ev.Str(fmt.Sprintf("top%d", i+1), fmt.Sprintf("%s %.1f%%", e.Function, e.FlatPct))
	}
	if tr != nil && tr.File != "" {
		ev = ev.Str("trace", tr.File).Int64("trace_bytes", tr.Bytes)
		if len(tr.Requests) > 0 {
			ev = ev.Str("slowest_in_trace", tr.Requests[0].RequestID+": "+tr.Requests[0].Words())
		}
	}
	ev.Msg(msg)
	s.p = p
}

// record waits for the shot and records its profile on a's incident: at
// page time (kind "page") or after the resolve ("after"). It runs beside
// the webhook: a slow or dead gateway never delays the page.
func (l *Lifecycle) record(a store.Accepted, kind string, s *shot) {
	<-s.done
	result := "ok"
	if s.p.Error != "" {
		result = "error"
	}
	l.profiles.WithLabelValues(kind, result).Inc()
	add, what := l.cfg.Store.AddProfile, "profile"
	if kind == "after" {
		add, what = l.cfg.Store.AddAfterProfile, "profile after the resolve"
	}
	l.journal(a.Incident, what, func(at time.Time) error { return add(a.Incident, s.p, at) })
}

// captureAfter takes the second profile of a resolved page, from the same
// source and read the same way, so the web UI can show the page-time
// profile's functions against it. A page with no page-time profile has
// nothing to compare and gets none.
func (l *Lifecycle) captureAfter(a store.Accepted) {
	id := a.Incident
	inc, ok := l.cfg.Store.Incident(id)
	if !ok || inc.Profile == nil || inc.Profile.File == "" || inc.After != nil {
		l.cfg.Log.Info().Str("incident", id).Msg("no page-time profile to compare with: no profile taken after the resolve")
		return
	}
	// Asked now, once the page-time profile is in: the shot taken is
	// younger than both it and the resolve.
	l.record(a, "after", l.join(a, "after", l.clock.Now()))
}

// resolveFor is how long the processes of a rule are looked for again
// while Prometheus lists none of a job's (or cannot be read): one that has
// just started lists its targets only after its first discovery update,
// which it holds back 5 s, and a page in those seconds would otherwise be
// profiled nowhere. Other errors (more targets than max_targets, a port
// label that is no port) are not asked again.
const resolveFor = 10 * time.Second

// captureFor bounds one capture of rule r: the looking for its processes,
// then the profile timeout for each kind it takes (the heap and its
// Profiles), and a cpu profile's seconds.
func (l *Lifecycle) captureFor(r *targets.Rule) time.Duration {
	d := resolveFor + time.Duration(1+len(r.Profiles))*l.cfg.ProfileTimeout
	if slices.Contains(r.Profiles, "cpu") {
		d += time.Duration(r.CPUSeconds) * time.Second
	}
	return d
}

// resolve lists the processes of rule r (targets.Resolve), asking again
// every second for up to resolveFor while the answer may change
// (targets.ErrNotYet), each try within the profile timeout.
func (l *Lifecycle) resolve(ctx context.Context, r *targets.Rule) ([]targets.Target, error) {
	deadline := time.Now().Add(resolveFor)
	for {
		tctx, cancel := context.WithTimeout(ctx, l.cfg.ProfileTimeout)
		ts, err := targets.Resolve(tctx, l.cfg.Discovery, r)
		cancel()
		if err == nil || !errors.Is(err, targets.ErrNotYet) || time.Now().After(deadline) {
			return ts, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// fetch profiles the heap of the processes of rule r (targets.Resolve:
// through Prometheus's discovery, or its static URLs), merged over every
// process (targets.Fetch) and stored as name, and returns the processes.
// The profile names each process, with its own top or why it has none,
// when the rule found them through Prometheus or lists several.
func (l *Lifecycle) fetch(ctx context.Context, r *targets.Rule, name string) (incident.Profile, []targets.Target, error) {
	p := incident.Profile{Rule: r.Name}
	ts, err := l.resolve(ctx, r)
	if err != nil {
		return p, nil, err
	}
	heap, err := l.takeKind(ctx, r, ts, targets.Heap, name)
	p.Instances = heap.Instances
	if err != nil {
		return p, ts, err
	}
	p.File, p.Total, p.Top, p.TakenAt = heap.File, heap.Total, heap.Top, time.Now()
	return p, ts, nil
}

// kinds takes each other kind of profile rule r names of its processes
// ts, stored beside the heap's name; one that fails says why, beside a
// heap that came.
func (l *Lifecycle) kinds(ctx context.Context, r *targets.Rule, ts []targets.Target, name string) []incident.KindProfile {
	var out []incident.KindProfile
	for _, k := range r.Profiles {
		kp, err := l.takeKind(ctx, r, ts, targets.Kinds[k], strings.TrimSuffix(name, ".pb.gz")+"-"+k+".pb.gz")
		if err != nil {
			kp.Error = err.Error()
		}
		out = append(out, kp)
	}
	return out
}

// takeKind fetches one kind of profile of every process and stores the
// merge as name; the processes are named one by one when the rule found
// them through Prometheus or lists several.
func (l *Lifecycle) takeKind(ctx context.Context, r *targets.Rule, ts []targets.Target, k targets.Kind, name string) (incident.KindProfile, error) {
	kp := incident.KindProfile{Kind: k.Name, SampleType: k.SampleType}
	got, err := targets.Fetch(ctx, l.cfg.Client, ts, k, targets.Limits{Concurrency: r.Concurrency, Timeout: l.cfg.ProfileTimeout, CPUSeconds: r.CPUSeconds})
	if len(r.Jobs) > 0 || len(ts) > 1 {
		kp.Instances = got.Instances
	}
	if err != nil {
		if len(ts) == 1 {
			err = errors.New(got.Instances[0].Error)
		}
		return kp, err
	}
	if err := l.cfg.Store.SaveProfile(name, got.Raw); err != nil {
		return kp, fmt.Errorf("storing the %s profile: %w", k.Name, err)
	}
	kp.File, kp.Total, kp.Top = path.Join(store.ProfilesDir, name), got.Total, got.Top
	return kp, nil
}
