package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"

	"burnlab/pager/internal/store"
)

// A finding is what the pager learns of a page after Alertmanager has sent
// it: the heap's verdict, which needs a delta heap profile from during the
// burn and so is read once the page is in (facts.go). Alertmanager's
// notification of the page is built from the annotations Prometheus wrote
// when the alert fired, too early to hold it. So the pager posts the
// verdict to Alertmanager as an alert of its own: the page's labels, its
// alertname with FindingSuffix, and FindingLabel. Routed as the page is
// (severity), it reaches the same receivers as a message of its own, a
// group_wait (10 s in the lab, 30 s in production) after the facts are
// read, which is seconds after the page arrives (up to heapdelta.Slack
// more when the delta open at the alert's start is waited for), and
// burnlab's template (alertmanager/templates) says the verdict in words
// with the page's link: someone who reads only the chat or the e-mail
// learns what changed in the heap without opening the page.
//
// Its own alertname puts it in a group of its own (alertmanager.yml
// groups by alertname): in the page's group it would make Alertmanager
// send the page again with it, once as it fires and once as it ends, and
// every receiver would get the page twice more.

// FindingLabel marks an alert as the pager's finding on a page, and names
// what was found ("heap"). The pager's own webhook drops such alerts when
// Alertmanager routes them to it as it routes pages: they are no pages.
const FindingLabel = "burnlab_finding"

// IncidentLabel is the incident a finding is on.
const IncidentLabel = "burnlab_incident"

// FindingSuffix ends a finding's alertname, after its page's.
const FindingSuffix = "HeapFinding"

// FindingFor is how long a finding stays firing in Alertmanager when the
// pager never posts its end: the page's resolve ends it (postFinding), but
// a pager that is down then would leave it firing, re-sent to the page's
// receivers every repeat_interval (4 h). A day outlasts any burn this lab
// makes; past it Alertmanager resolves the finding on its own.
const FindingFor = 24 * time.Hour

// amAlert is an alert as Alertmanager's v2 API takes it (POST
// /api/v2/alerts).
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// ParseAlertmanagers reads -alertmanager-urls: base URLs, comma-separated,
// each http(s)://host:port with an optional path prefix. An empty list
// posts no findings.
func ParseAlertmanagers(list string) ([]string, error) {
	var out []string
	for raw := range strings.SplitSeq(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		// No user:password@: the URLs are logged.
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("the Alertmanager URL %q: want http(s)://host:port", raw)
		}
		out = append(out, strings.TrimRight(raw, "/"))
	}
	return out, nil
}

// IsFinding says whether an alert Alertmanager sent is one of the pager's
// findings.
func IsFinding(a store.Alert) bool {
	_, ok := a.Labels[FindingLabel]
	return ok
}

// postFinding posts an incident's heap finding to every Alertmanager of
// -alertmanager-urls (each holds its own alerts; gossip shares only what
// was notified): firing while the page fires, resolved once it has
// resolved. It is called when the facts are stored and when the page's
// resolve is, the two moments it can change, and runs under the
// incident's lock from the store's read to the post: whichever of the two
// comes second reads both the facts and the resolve, and its post, the
// younger, is the one Alertmanager keeps. No facts yet, or a heap that
// was not compared (no deltas, no burn window): nothing to post, the page
// says why.
func (l *Lifecycle) postFinding(id string) {
	if len(l.cfg.Alertmanagers) == 0 {
		return
	}
	mu := &l.findingMu[fnv32(id)%uint32(len(l.findingMu))]
	mu.Lock()
	defer mu.Unlock()
	inc, ok := l.cfg.Store.Incident(id)
	if !ok || inc.Facts == nil || inc.Facts.Heap == nil || inc.Facts.Heap.Error != "" {
		return
	}
	a := amAlert{
		Labels: maps.Clone(inc.Labels),
		Annotations: map[string]string{
			"summary":   "What changed in the gateway's heap over the burn, as the pager found it",
			"heap":      inc.Facts.Heap.Words,
			"pager_url": l.incidentURL(id),
		},
		StartsAt:     inc.Facts.TakenAt,
		EndsAt:       inc.Facts.TakenAt.Add(FindingFor),
		GeneratorURL: l.incidentURL(id),
	}
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	// The incident names the finding: a page that fires again is a new
	// incident, whose finding must not be ended by the last one's.
	a.Labels[FindingLabel], a.Labels[IncidentLabel] = "heap", id
	a.Labels[model.AlertNameLabel] += FindingSuffix
	if now := l.clock.Now(); inc.Status == "resolved" {
		a.EndsAt = now
		if now.Before(a.StartsAt) {
			a.StartsAt = now
		}
	}
	body, err := json.Marshal([]amAlert{a})
	if err != nil {
		l.cfg.Log.Error().Err(err).Str("incident", id).Msg("could not encode the heap finding")
		return
	}
	var posts sync.WaitGroup
	for _, base := range l.cfg.Alertmanagers {
		posts.Go(func() {
			err := l.postRetried(base+"/api/v2/alerts", body)
			result := "ok"
			if err != nil {
				result = "error"
				l.cfg.Log.Error().Err(err).Str("incident", id).Str("alertmanager", base).Str("status", inc.Status).
					Msg("could not post the heap finding: its message goes without it")
			}
			l.findings.WithLabelValues(result).Inc()
		})
	}
	posts.Wait()
}

// findingTries is how many times a finding is posted to one Alertmanager
// before the pager gives up, one second apart and then two: a replica
// restarting, or a network blip, is not the end of it, above all for the
// post that ends a finding, which nothing sends again.
const findingTries = 3

// postRetried posts body to url up to findingTries times, each bounded by
// FactsTimeout, until one succeeds or the pager closes.
func (l *Lifecycle) postRetried(url string, body []byte) error {
	var err error
	for try := range findingTries {
		if try > 0 && l.clock.Sleep(l.captureCtx, time.Duration(try)*time.Second) != nil {
			break
		}
		ctx, cancel := context.WithTimeout(l.captureCtx, l.cfg.FactsTimeout)
		err = l.post(ctx, url, body)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// fnv32 spreads incident IDs over the finding locks.
func fnv32(s string) uint32 {
	f := fnv.New32a()
	f.Write([]byte(s)) // a hash's Write never fails
	return f.Sum32()
}

// post sends one JSON body and wants a 200.
func (l *Lifecycle) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("posting to %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // only for the error
		return fmt.Errorf("posting to %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
