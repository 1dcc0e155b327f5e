package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"burnlab/shared/incident"
	"burnlab/shared/scenario"
)

// Incidents asks the lab's pager.
func (l *Lab) Incidents() ([]incident.Incident, error) {
	// Not `return incs, getJSON(…, &incs)`: the spec leaves it open
	// whether incs is read before or after the call fills it.
	var incs []incident.Incident
	if err := getJSON("http://"+l.cfg.Addrs.Pager+"/api/incidents", &incs); err != nil {
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
func (l *Lab) Alerts() ([]Alert, error) {
	var r struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON("http://"+l.cfg.Addrs.Prometheus+"/api/v1/alerts", &r); err != nil {
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
func (l *Lab) AMAlerts() ([]AMAlert, error) {
	var alerts []AMAlert
	if err := getJSON("http://"+l.cfg.Addrs.Alertmanager+"/api/v2/alerts", &alerts); err != nil {
		return nil, err
	}
	return alerts, nil
}

// Query evaluates an instant PromQL query on the lab's Prometheus and
// returns the value of each series, keyed by its labels.
func (l *Lab) Query(q string) (map[string]float64, error) {
	samples, err := l.query(q)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[fmt.Sprint(s.labels)] = s.value
	}
	return out, nil
}

// Series returns the label sets an instant query's result has.
func (l *Lab) Series(q string) ([]map[string]string, error) {
	samples, err := l.query(q)
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

func (l *Lab) query(q string) ([]sample, error) {
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
	if err := getJSON("http://"+l.cfg.Addrs.Prometheus+"/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
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

// SetScenario starts a scenario of shared/scenario on the lab's upstream
// (none clears it), as make scenario does.
func (l *Lab) SetScenario(ctx context.Context, name string) error {
	return scenario.Set(ctx, "http://"+l.cfg.Addrs.Upstream, name)
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
