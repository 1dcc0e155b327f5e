package targets

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// ErrNotYet marks what may be otherwise when asked again: Prometheus lists
// no active target of a job (one that has just started lists none for its
// first seconds), or could not be asked.
var ErrNotYet = errors.New("not yet")

// Target is one process to profile.
type Target struct {
	// Instance names it on the page: its instance label, or its URL's
	// host for a static one.
	Instance string `json:"instance"`
	URL      string `json:"url"`
}

// Discovery lists Prometheus's scrape targets: v1.API.
type Discovery interface {
	Targets(ctx context.Context) (v1.TargetsResult, error)
}

// Resolve lists the processes of rule r: its static URLs, or the active
// targets of its jobs in Prometheus (d), each at the rule's pprof port and
// path on the host Prometheus scrapes. A job with no active target, or a
// rule with more than MaxTargets processes, is an error: a page is not
// profiled on some of a service's processes without saying which.
func Resolve(ctx context.Context, d Discovery, r *Rule) ([]Target, error) {
	if len(r.Static) > 0 {
		out := make([]Target, 0, len(r.Static))
		for _, s := range r.Static {
			u, err := url.Parse(s)
			if err != nil { // checked by Parse
				return nil, fmt.Errorf("rule %q: %w", r.Name, err)
			}
			out = append(out, Target{Instance: u.Host, URL: s})
		}
		return out, nil
	}
	if d == nil {
		return nil, fmt.Errorf("rule %q finds its processes through Prometheus, and the pager has no -prometheus-url", r.Name)
	}
	res, err := d.Targets(ctx)
	if err != nil {
		return nil, fmt.Errorf("rule %q: listing Prometheus's targets: %w (%w)", r.Name, err, ErrNotYet)
	}
	var out []Target
	found := map[string]int{}
	for _, t := range res.Active {
		job := string(t.Labels["job"])
		if !slices.Contains(r.Jobs, job) {
			continue
		}
		found[job]++
		if len(out) == r.MaxTargets {
			return nil, fmt.Errorf("rule %q: its jobs have more than %d active targets (max_targets): none is profiled; narrow the jobs or raise max_targets", r.Name, r.MaxTargets)
		}
		tg, err := r.target(t)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		out = append(out, tg)
	}
	for _, j := range r.Jobs {
		if found[j] == 0 {
			return nil, fmt.Errorf("rule %q: Prometheus has no active target of job %q: is the job's name right, and is it scraped? (%w)", r.Name, j, ErrNotYet)
		}
	}
	slices.SortFunc(out, func(a, b Target) int { return cmp.Compare(a.Instance, b.Instance) })
	return out, nil
}

// target is the pprof URL of one active target: the host Prometheus
// scrapes, the port of PortLabel where the target has that label, else the
// rule's Port, else the scrape's own, and the rule's path.
func (r *Rule) target(t v1.ActiveTarget) (Target, error) {
	u, err := url.Parse(t.ScrapeURL)
	if err != nil || u.Hostname() == "" {
		return Target{}, fmt.Errorf("target %q has scrape URL %.100q, which names no host", t.Labels["instance"], t.ScrapeURL)
	}
	port := u.Port()
	if r.Port != 0 {
		port = strconv.Itoa(r.Port)
	}
	if r.PortLabel != "" {
		v, ok := string(t.Labels[model.LabelName(r.PortLabel)]), t.Labels[model.LabelName(r.PortLabel)] != ""
		if !ok {
			v, ok = t.DiscoveredLabels[r.PortLabel]
		}
		if ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return Target{}, fmt.Errorf("target %q has %s=%.20q, which is no TCP port", t.Labels["instance"], r.PortLabel, v)
			}
			port = strconv.Itoa(n) // "+80" and "0080" are 80
		}
	}
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	scheme := u.Scheme
	if scheme != "https" {
		scheme = "http"
	}
	ref, _ := url.Parse(r.Path) // checked by Parse
	p := url.URL{Scheme: scheme, Host: net.JoinHostPort(u.Hostname(), port), Path: ref.Path, RawQuery: ref.RawQuery}
	inst := string(t.Labels["instance"])
	if inst == "" {
		inst = u.Host
	}
	return Target{Instance: inst, URL: p.String()}, nil
}
