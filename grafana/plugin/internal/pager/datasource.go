// Package pager is the backend of burnlab's Grafana datasource plugin: it
// reads the pager's API and answers three query types — `incidents`, a
// table of pages and tickets with their timelines; `flamegraph`, the heap
// profile captured when a page fired, as a flame graph of alloc_space; and
// `facts`, what the pager read when a page fired (facts.go).
package pager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"burnlab/shared/incident"
	"burnlab/shared/pproftop"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/instancemgmt"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// PluginID is the plugin's id in plugin.json; Grafana loads it unsigned
// only when GF_PLUGINS_ALLOW_LOADING_UNSIGNED_PLUGINS names it.
const PluginID = "burnlab-pager-datasource"

// Datasource is one configured pager datasource.
type Datasource struct {
	base   *url.URL
	client *http.Client
}

// NewDatasource is the instance factory: the datasource's URL is the
// pager's base URL (http://pager:5001 in compose).
func NewDatasource(_ context.Context, s backend.DataSourceInstanceSettings) (instancemgmt.Instance, error) {
	u, err := url.Parse(strings.TrimSpace(s.URL))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("pager URL %q: want an absolute URL such as http://pager:5001", s.URL)
	}
	return &Datasource{base: u, client: &http.Client{Timeout: 15 * time.Second}}, nil
}

// queryModel is a panel's query.
type queryModel struct {
	QueryType string `json:"queryType"`
	// Incident picks the incident whose profile a flame graph, or whose
	// facts, a query shows, any the pager keeps; empty means the newest
	// page with a profile (with facts), among the pager's 50 newest pages.
	Incident string `json:"incident"`
}

// QueryData answers each query independently: one failing does not sink
// the others.
func (d *Datasource) QueryData(ctx context.Context, req *backend.QueryDataRequest) (*backend.QueryDataResponse, error) {
	resp := backend.NewQueryDataResponse()
	for _, q := range req.Queries {
		var m queryModel
		if len(q.JSON) > 0 {
			if err := json.Unmarshal(q.JSON, &m); err != nil {
				resp.Responses[q.RefID] = backend.ErrDataResponse(backend.StatusBadRequest, "query is not JSON: "+err.Error())
				continue
			}
		}
		if q.QueryType != "" {
			m.QueryType = q.QueryType
		}
		resp.Responses[q.RefID] = d.query(ctx, m)
	}
	return resp, nil
}

func (d *Datasource) query(ctx context.Context, m queryModel) backend.DataResponse {
	switch m.QueryType {
	case "incidents", "":
		incs, _, err := d.incidents(ctx, "")
		if err != nil {
			return backend.ErrDataResponse(backend.StatusBadGateway, err.Error())
		}
		return backend.DataResponse{Frames: data.Frames{incidentsFrame(incs)}}
	case "flamegraph":
		frame, err := d.flameGraph(ctx, m.Incident)
		if err != nil {
			return backend.ErrDataResponse(backend.StatusBadGateway, err.Error())
		}
		return backend.DataResponse{Frames: data.Frames{frame}}
	case "facts":
		frames, err := d.facts(ctx, m.Incident)
		if err != nil {
			return backend.ErrDataResponse(backend.StatusBadGateway, err.Error())
		}
		return backend.DataResponse{Frames: frames}
	}
	return backend.ErrDataResponse(backend.StatusBadRequest, fmt.Sprintf("unknown query type %q: want incidents, flamegraph or facts", m.QueryType))
}

// incidentsFrame is the table of incidents. burn_rate is the burn_rate
// annotation of the latest notification (a resolve's, once resolved); burn
// at firing is the first firing notification's; heap is the facts' verdict
// on the heap, in words, "" when not compared.
func incidentsFrame(incs []incident.Incident) *data.Frame {
	f := data.NewFrame("incidents",
		data.NewField("started", nil, []time.Time{}),
		data.NewField("ended", nil, []*time.Time{}),
		data.NewField("severity", nil, []string{}),
		data.NewField("status", nil, []string{}),
		data.NewField("slo", nil, []string{}),
		data.NewField("alert", nil, []string{}),
		data.NewField("burn_rate", nil, []string{}),
		data.NewField("burn at firing", nil, []string{}),
		data.NewField("top_alloc_space", nil, []string{}),
		data.NewField("heap", nil, []string{}),
		data.NewField("timeline", nil, []string{}),
		data.NewField("id", nil, []string{}),
	)
	for _, inc := range incs {
		top := ""
		if inc.Profile != nil && len(inc.Profile.Top) > 0 {
			top = fmt.Sprintf("%s (%.1f%%)", inc.Profile.Top[0].Function, inc.Profile.Top[0].FlatPct)
		} else if inc.Profile != nil {
			top = "capture failed: " + inc.Profile.Error
		}
		heap := ""
		if inc.Facts != nil && inc.Facts.Heap != nil {
			heap = inc.Facts.Heap.Words
			if g := inc.Facts.Heap.Growth; g != nil && g.Words != "" {
				heap += "; " + g.Words
			}
		}
		var tl []string
		for _, e := range inc.Timeline {
			tl = append(tl, e.At.UTC().Format("15:04:05")+" "+e.What())
		}
		f.AppendRow(inc.StartsAt, inc.EndsAt, inc.Severity, inc.Status, inc.SLO, inc.AlertName,
			inc.Annotations["burn_rate"], inc.BurnRate, top, heap, strings.Join(tl, "; "), inc.ID)
	}
	return f
}

// flameGraph is the profile of incident id or, with none chosen, of the
// newest page that has one (pick).
func (d *Datasource) flameGraph(ctx context.Context, id string) (*data.Frame, error) {
	hasProfile := func(inc *incident.Incident) bool { return inc.Profile != nil && inc.Profile.File != "" }
	pick, err := d.pick(ctx, id, hasProfile)
	if err != nil {
		return nil, err
	}
	switch {
	case pick == nil:
		return nil, errors.New("no page has a captured profile yet")
	case !hasProfile(pick):
		return nil, fmt.Errorf("incident %s has no captured profile", id)
	}
	body, err := d.get(ctx, "/api/incidents/"+url.PathEscape(pick.ID)+"/profile")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	_, p, err := pproftop.Read(body, pproftop.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: %w", pick.ID, err)
	}
	return FlameGraph(p, "alloc_space")
}

// pick is incident id, however far down the pager's list, whether or not
// has holds for it; or, with none chosen, the newest page for which has
// holds, among the pages on the first page of the pager's list (its 50
// newest); nil when none does.
func (d *Datasource) pick(ctx context.Context, id string, has func(*incident.Incident) bool) (*incident.Incident, error) {
	if id != "" {
		inc, err := d.incident(ctx, id)
		if err != nil {
			return nil, err
		}
		return &inc, nil
	}
	incs, _, err := d.incidents(ctx, "severity=page")
	if err != nil {
		return nil, err
	}
	for i := range incs { // newest first
		if incs[i].Severity == "page" && has(&incs[i]) {
			return &incs[i], nil
		}
	}
	return nil, nil
}

// incidents is the first page of the pager's list (its newest incidents)
// for the query, and how many incidents the query takes in all.
func (d *Datasource) incidents(ctx context.Context, query string) ([]incident.Incident, int, error) {
	resp, err := d.do(ctx, "/api/incidents", query)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var incs []incident.Incident
	if err := json.NewDecoder(resp.Body).Decode(&incs); err != nil {
		return nil, 0, fmt.Errorf("pager /api/incidents: %w", err)
	}
	total, err := strconv.Atoi(resp.Header.Get("X-Total-Count"))
	if err != nil { // a pager from before its list had pages
		total = len(incs)
	}
	return incs, total, nil
}

// incident is one incident, however far down the list.
func (d *Datasource) incident(ctx context.Context, id string) (incident.Incident, error) {
	path := "/api/incidents/" + url.PathEscape(id)
	resp, err := d.do(ctx, path, "")
	if err != nil {
		return incident.Incident{}, err
	}
	defer resp.Body.Close()
	var inc incident.Incident
	if err := json.NewDecoder(resp.Body).Decode(&inc); err != nil {
		return incident.Incident{}, fmt.Errorf("pager %s: %w", path, err)
	}
	return inc, nil
}

func (d *Datasource) get(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := d.do(ctx, path, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (d *Datasource) do(ctx context.Context, path, query string) (*http.Response, error) {
	u := d.base.JoinPath(path)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("pager: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("pager %s: %s", path, resp.Status)
	}
	return resp, nil
}

// CheckHealth is Grafana's "Save & test": can the pager be reached?
func (d *Datasource) CheckHealth(ctx context.Context, _ *backend.CheckHealthRequest) (*backend.CheckHealthResult, error) {
	_, total, err := d.incidents(ctx, "")
	if err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: "cannot read the pager at " + d.base.String() + ": " + err.Error()}, nil
	}
	return &backend.CheckHealthResult{Status: backend.HealthStatusOk, Message: fmt.Sprintf("pager reachable: %d incidents", total)}, nil
}

// Dispose is called when the datasource's settings change.
func (d *Datasource) Dispose() { d.client.CloseIdleConnections() }
