package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"burnlab/shared/incident"
	"burnlab/shared/scenario"
)

// Probe reads a running stack through the contract's addresses: the
// pager's API and web UI, Prometheus's and Alertmanager's APIs and the
// upstream's scenario control. A native lab has one (Lab embeds it); a
// compose stack publishes the same ports, so DefaultAddrs reads it.
type Probe struct{ Addrs Addrs }

// Incidents asks the stack's pager.
func (l Probe) Incidents() ([]incident.Incident, error) {
	// Not `return incs, getJSON(…, &incs)`: the spec leaves it open
	// whether incs is read before or after the call fills it.
	var incs []incident.Incident
	if err := getJSON("http://"+l.Addrs.Pager+"/api/incidents", &incs); err != nil {
		return nil, err
	}
	return incs, nil
}

// Alert is one entry of Prometheus's /api/v1/alerts.
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Alerts asks the lab's Prometheus which alerts are pending or firing.
func (l Probe) Alerts() ([]Alert, error) {
	var r struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON("http://"+l.Addrs.Prometheus+"/api/v1/alerts", &r); err != nil {
		return nil, err
	}
	return r.Data.Alerts, nil
}

// AMAlert is one entry of Alertmanager's /api/v2/alerts: an alert it
// holds, active or suppressed (inhibited or silenced); resolved ones are
// not listed.
type AMAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// AMAlerts asks the lab's Alertmanager which alerts it holds.
func (l Probe) AMAlerts() ([]AMAlert, error) {
	var alerts []AMAlert
	if err := getJSON("http://"+l.Addrs.Alertmanager+"/api/v2/alerts", &alerts); err != nil {
		return nil, err
	}
	return alerts, nil
}

// Query evaluates an instant PromQL query on the stack's Prometheus and
// returns the value of each series, keyed by its labels.
func (l Probe) Query(q string) (map[string]float64, error) { return l.QueryAt(q, time.Time{}) }

// Series returns the label sets an instant query's result has.
func (l Probe) Series(q string) ([]map[string]string, error) {
	samples, err := l.query(q, time.Time{})
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, s := range samples {
		out = append(out, s.labels)
	}
	return out, nil
}

type sample struct {
	labels map[string]string
	value  float64
}

// QueryAt is Query at a past time; the zero time is now.
func (l Probe) QueryAt(q string, at time.Time) (map[string]float64, error) {
	samples, err := l.query(q, at)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[fmt.Sprint(s.labels)] = s.value
	}
	return out, nil
}

func (l Probe) query(q string, at time.Time) ([]sample, error) {
	param := ""
	if !at.IsZero() {
		param = "&time=" + strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON("http://"+l.Addrs.Prometheus+"/api/v1/query?query="+url.QueryEscape(q)+param, &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	var out []sample
	for _, s := range r.Data.Result {
		v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: %v: %w", q, s.Metric, err)
		}
		out = append(out, sample{s.Metric, v})
	}
	return out, nil
}

// Versions are the running Prometheus's and Alertmanager's release
// versions, as their APIs report them (3.16.0, 0.35.0).
func (l Probe) Versions() (prometheus, alertmanager string, err error) {
	var p struct {
		Data struct {
			Version string `json:"version"`
		} `json:"data"`
	}
	if err := getJSON("http://"+l.Addrs.Prometheus+"/api/v1/status/buildinfo", &p); err != nil {
		return "", "", err
	}
	var a struct {
		VersionInfo struct {
			Version string `json:"version"`
		} `json:"versionInfo"`
	}
	if err := getJSON("http://"+l.Addrs.Alertmanager+"/api/v2/status", &a); err != nil {
		return "", "", err
	}
	return p.Data.Version, a.VersionInfo.Version, nil
}

// Incident is the pager's incident id, asked for by its ID (not looked
// up in the list, which is paged); one with an empty ID when the pager
// holds none by that ID.
func (l Probe) Incident(id string) (incident.Incident, error) {
	u := "http://" + l.Addrs.Pager + "/api/incidents/" + url.PathEscape(id)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(u)
	if err != nil {
		return incident.Incident{}, err
	}
	defer resp.Body.Close()
	var inc incident.Incident
	switch resp.StatusCode {
	case http.StatusNotFound:
		return inc, nil
	case http.StatusOK:
		return inc, json.NewDecoder(resp.Body).Decode(&inc)
	}
	return inc, fmt.Errorf("GET %s: %s", u, resp.Status)
}

// PagerShows reads a page of the pager's web UI and says what of want it
// lacks (each as the page's HTML escapes it).
func (l Probe) PagerShows(path string, want ...string) error {
	b, err := l.pagerPage(path)
	if err != nil {
		return err
	}
	for _, w := range want {
		if !strings.Contains(b, html.EscapeString(w)) {
			return fmt.Errorf("pager web UI %s does not show %q", path, w)
		}
	}
	return nil
}

// pagerPage is a page of the pager's web UI, as HTML.
func (l Probe) pagerPage(path string) (string, error) {
	// A hung pager is an error within a poll, not a hang of the caller.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + l.Addrs.Pager + path)
	if err != nil {
		return "", fmt.Errorf("pager web UI: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("pager web UI %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("pager web UI %s: %s", path, resp.Status)
	}
	return string(b), nil
}

// SetScenario starts a scenario of shared/scenario on the lab's upstream
// (none clears it), as make scenario does.
func (l Probe) SetScenario(ctx context.Context, name string) error {
	return scenario.Set(ctx, "http://"+l.Addrs.Upstream, name)
}

func getJSON(u string, v any) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
