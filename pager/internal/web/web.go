// Package web is the page the person who got paged opens: the pager's
// incidents, each with the facts read when it paged (the burn of each
// window pair, a chart of the burn read from Prometheus, the budget, the
// slowest requests, what changed in the heap), its timeline and the
// gateway's heap profile taken when it paged, shown in pprof's own web UI,
// and once resolved the difference to a profile taken after. Server-rendered with html/template
// (everything that came in a payload is escaped), no script of its own and
// nothing fetched from elsewhere, so it works offline; every route is a
// GET.
package web

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/burnchart"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop"
	"burnlab/shared/slo"
)

//go:embed templates/*.html
var templateFS embed.FS

// Config is what a Handler needs.
type Config struct {
	Store *store.Store
	Log   zerolog.Logger
	// MaxViews bounds the pprof UIs kept built (one per incident and view
	// kind); default 8.
	MaxViews int
	// Refresh is how often a page with a firing incident reloads itself;
	// default 10 s.
	Refresh time.Duration
	// Prometheus is where an incident's burn chart is read, at each
	// render; nil draws none, and the page says so.
	Prometheus *promfacts.Client
	// ChartTimeout bounds the chart's queries, so a slow Prometheus
	// costs the page a note, not its answer; default 5 s.
	ChartTimeout time.Duration
	// ExternalURL is the pager's base URL as a person's browser reaches it
	// (no trailing slash); with it the API's incidents carry their page
	// (IncidentURL).
	ExternalURL string
}

// Handler serves the web UI and the incidents' JSON API.
type Handler struct {
	cfg      Config
	mux      *http.ServeMux
	tmpl     *template.Template
	views    *viewCache
	hasGraph bool
}

// New parses the templates and registers the routes: the pages and the
// API in one table.
func New(cfg Config) (*Handler, error) {
	if cfg.MaxViews <= 0 {
		cfg.MaxViews = 8
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 10 * time.Second
	}
	if cfg.ChartTimeout <= 0 {
		cfg.ChartTimeout = 5 * time.Second
	}
	tmpl, err := template.New("").Funcs(template.FuncMap{
		"bytes":    formatBytes,
		"when":     formatTime,
		"quote":    regexp.QuoteMeta,
		"duration": formatDuration,
		"burn":     incident.Burn,
		"num":      incident.Number,
		"value":    formatValue,
		"rate":     formatRate,
		"clock":    func(t time.Time) string { return t.UTC().Format("15:04:05") },
		"share":    formatShare,
		"split":    traceSplit,
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	_, dotErr := exec.LookPath("dot")
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), tmpl: tmpl, views: newViewCache(cfg.MaxViews), hasGraph: dotErr == nil}
	// GET patterns only: the mux answers any other method with 405 and an
	// Allow header, so nothing here can be made to write.
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.HandleFunc("GET /incidents/{id}", h.incident)
	for _, k := range pprofKinds {
		h.mux.HandleFunc("GET /incidents/{id}/"+k.route+"/{view...}", h.pprof(k))
	}
	h.mux.HandleFunc("GET /slo/{slo}", h.slo)
	// The snapshot is served as the API's files are; the incident's page
	// links to it.
	h.mux.HandleFunc("GET /incidents/{id}/trace", h.getTrace)
	h.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		h.notFound(w, "There is no page "+r.URL.Path+".")
	})
	h.mux.HandleFunc("GET /api/incidents", h.listIncidents)
	h.mux.HandleFunc("GET /api/incidents/{id}", h.getIncident)
	h.mux.HandleFunc("GET /api/incidents/{id}/profile", h.getProfile)
	h.mux.HandleFunc("GET /api/incidents/{id}/profile/{kind}", h.getKind)
	h.mux.HandleFunc("GET /api/incidents/{id}/delta/{which}", h.getDelta)
	h.mux.HandleFunc("GET /api/incidents/{id}/trace", h.getTrace)
	h.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "no API route "+r.URL.Path)
	})
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

type page struct {
	Title   string
	Refresh int // seconds; 0: none
}

type indexPage struct {
	page
	store.Page
	Filter   store.Filter
	Filtered bool
	// Newer and Older are the links to the pages beside this one, "" at
	// either end; JSON is this page in the API.
	Newer, Older, JSON string
}

// index is one page of the incidents, newest first, with the filters of
// the query (store.ParseQuery): store.PageSize a page, so the answer stays
// the same size however long the history.
func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	f, number, err := store.ParseQuery(r.URL.Query())
	if err != nil {
		h.renderError(w, http.StatusBadRequest, "Bad query: "+err.Error()+".")
		return
	}
	p := indexPage{page: page{Title: "Incidents — burnlab pager"}, Page: h.cfg.Store.List(f, number, store.PageSize), Filter: f, Filtered: f != store.Filter{}}
	if p.Number > p.Pages {
		h.renderError(w, http.StatusBadRequest, fmt.Sprintf("Bad query: page %d is past the last, %d.", p.Number, p.Pages))
		return
	}
	link := func(path string, n int) string {
		return (&url.URL{Path: path, RawQuery: f.Values(n).Encode()}).String()
	}
	p.JSON = link("/api/incidents", p.Number)
	if p.Number > 1 {
		p.Newer = link("/", p.Number-1)
	}
	if p.Number < p.Pages {
		p.Older = link("/", p.Number+1)
	}
	if p.Firing > 0 {
		p.Refresh = int(h.cfg.Refresh.Seconds())
	}
	h.render(w, http.StatusOK, "index.html", p)
}

type incidentPage struct {
	page
	incident.Incident
	Labels, Annotations []kv
	// Top is the page-time profile's top function, for the source and
	// peek links.
	Top      string
	HasGraph bool
	// Shared and AfterShared count the incidents that use the page-time
	// and the after profile's file, this one included: pages close
	// together share one fetch from the gateway.
	Shared, AfterShared int
	// Chart is the burn chart, or ChartNote why there is none.
	Chart     template.HTML
	ChartNote string
	// NoPrometheus is whether the pager runs without -prometheus-url.
	NoPrometheus bool
}

type kv struct{ Key, Value string }

func sorted(m map[string]string) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func (h *Handler) incident(w http.ResponseWriter, r *http.Request) {
	inc, ok := h.cfg.Store.Incident(r.PathValue("id"))
	if !ok {
		h.notFound(w, "There is no incident "+r.PathValue("id")+".")
		return
	}
	p := incidentPage{page: page{Title: inc.AlertName + " — burnlab pager"}, Incident: inc,
		Labels: sorted(inc.Labels), Annotations: sorted(inc.Annotations), HasGraph: h.hasGraph}
	if inc.Profile != nil {
		if len(inc.Profile.Top) > 0 {
			p.Top = inc.Profile.Top[0].Function
		}
		p.Shared = h.cfg.Store.Shares(inc.Profile.File)
	}
	if inc.After != nil {
		p.AfterShared = h.cfg.Store.Shares(inc.After.File)
	}
	// While it fires, the resolve and the second profile are still to come.
	if inc.Status == "firing" || (inc.Status == "resolved" && inc.Profile != nil && inc.Profile.File != "" && inc.After == nil) {
		p.Refresh = int(h.cfg.Refresh.Seconds())
	}
	p.NoPrometheus = h.cfg.Prometheus == nil
	p.Chart, p.ChartNote = h.chart(r.Context(), inc)
	h.render(w, http.StatusOK, "incident.html", p)
}

// chart draws the burn of the incident's pair (the one its facts were
// read over, or without facts the slowest of its burn_windows) from
// twice its long window before the alert started to its resolve, or now,
// read from Prometheus at each render: the page shows the burn going on
// while it fires. Any failure is a note in its place.
func (h *Handler) chart(ctx context.Context, inc incident.Incident) (template.HTML, string) {
	if h.cfg.Prometheus == nil {
		return "", "The pager runs without -prometheus-url: no burn chart."
	}
	pair, fired, note := chartPair(inc)
	if note != "" {
		return "", note
	}
	id := inc.Labels[promfacts.SlothIDLabel]
	if id == "" {
		return "", "No burn chart: the alert has no " + promfacts.SlothIDLabel + " label to read its SLO's burn by."
	}
	now := time.Now()
	from, to := inc.StartsAt.Add(-2*pair.Long), now
	if inc.EndsAt != nil && !inc.EndsAt.IsZero() {
		// A little past the resolve, to show the burn falling.
		if end := inc.EndsAt.Add(max(inc.EndsAt.Sub(from)/10, 30*time.Second)); end.Before(now) {
			to = end
		}
	}
	if !from.Before(to) {
		return "", "The alert started in the future of the pager's clock: no burn chart."
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ChartTimeout)
	defer cancel()
	short, long, err := h.cfg.Prometheus.Burn(ctx, id, pair, from, to)
	if err != nil {
		h.cfg.Log.Warn().Err(err).Str("incident", inc.ID).Msg("no burn chart: Prometheus could not be read")
		return "", "No burn chart: Prometheus at " + h.cfg.Prometheus.URL() + " could not be read (" + err.Error() + ")."
	}
	label := "over " + incident.Number(pair.Factor) + "x"
	if !fired {
		label += " (no pair was over its factor)"
	}
	c := burnchart.Chart{Short: short, Long: long, Threshold: pair.Factor, ThresholdLabel: label,
		Fired: inc.StartsAt, From: from, To: to, Title: "Burn rate of " + cmp.Or(inc.SLO, inc.AlertName) + ", " + pair.String()}
	if inc.EndsAt != nil {
		c.Resolved = *inc.EndsAt
	}
	svg, err := c.SVG()
	if err != nil {
		h.cfg.Log.Error().Err(err).Str("incident", inc.ID).Msg("could not draw the burn chart")
		return "", "Could not draw the burn chart: " + err.Error() + "."
	}
	return svg, ""
}

// chartPair is the window pair an incident's chart draws, whether it
// fired, or a note why there is none.
func chartPair(inc incident.Incident) (slo.Pair, bool, string) {
	if pb, ok := inc.Facts.Chosen(); ok {
		s, err1 := model.ParseDuration(pb.Short)
		l, err2 := model.ParseDuration(pb.Long)
		if err1 == nil && err2 == nil && s > 0 && l > 0 {
			return slo.Pair{Short: time.Duration(s), Long: time.Duration(l), Factor: pb.Factor}, pb.Fired, ""
		}
	}
	pairs, err := promfacts.AlertOf(inc.Labels, inc.Annotations, inc.StartsAt).Pairs()
	if err != nil {
		return slo.Pair{}, false, "No burn chart: " + err.Error() + "."
	}
	return pairs[promfacts.Choose(pairs, nil)], false, ""
}

// slo is the link in the page alert's annotations: Prometheus cannot know
// the incident's id, so it links the SLO, and this sends the browser on to
// that SLO's newest page (or, with none, its newest incident).
func (h *Handler) slo(w http.ResponseWriter, r *http.Request) {
	slo := r.PathValue("slo")
	newest := h.cfg.Store.List(store.Filter{SLO: slo, Severity: "page"}, 1, 1)
	if newest.Total == 0 {
		newest = h.cfg.Store.List(store.Filter{SLO: slo}, 1, 1)
	}
	if newest.Total == 0 {
		h.notFound(w, "No incident of SLO "+slo+" yet.")
		return
	}
	http.Redirect(w, r, "/incidents/"+newest.Incidents[0].ID, http.StatusFound)
}

// A pprofKind is one of an incident's pprof UIs, under
// /incidents/{id}/<route>/: one profile, or one against a base
// (-diff_base).
type pprofKind struct {
	route string
	// name and baseName are the profiles' names in pprof's UI.
	name, baseName string
	// files returns the profile shown and its base ("" for none), or
	// why the incident has no such view.
	files func(inc incident.Incident) (profile, base, missing string)
}

// pprofKinds: the page-time profile, the one after the resolve against
// it, and the delta during the burn against the one before it.
var pprofKinds = append([]pprofKind{
	{"pprof", "page", "", func(inc incident.Incident) (string, string, string) {
		if inc.Profile == nil || inc.Profile.File == "" {
			return "", "", "has no page-time profile"
		}
		return inc.Profile.File, "", ""
	}},
	{"diff", "after", "page", func(inc incident.Incident) (string, string, string) {
		switch {
		case inc.Profile == nil || inc.Profile.File == "":
			return "", "", "has no page-time profile"
		case inc.After == nil || inc.After.File == "":
			return "", "", "has no profile taken after it resolved (yet)"
		}
		return inc.After.File, inc.Profile.File, ""
	}},
	{"delta", "during", "before", func(inc incident.Incident) (string, string, string) {
		if inc.Facts == nil || inc.Facts.Heap == nil || inc.Facts.Heap.BeforeFile == "" || inc.Facts.Heap.DuringFile == "" {
			return "", "", "has no delta heap profiles from before and during its burn"
		}
		return inc.Facts.Heap.DuringFile, inc.Facts.Heap.BeforeFile, ""
	}},
}, kindViews()...)

// kindViews are one view more per kind a rule takes beside the heap
// (targets.Kinds), at /incidents/{id}/<kind>/.
func kindViews() []pprofKind {
	var out []pprofKind
	for _, k := range targets.ExtraKinds() {
		out = append(out, pprofKind{k, k, "", func(inc incident.Incident) (string, string, string) {
			if inc.Profile == nil || inc.Profile.Kind(k) == nil || inc.Profile.Kind(k).File == "" {
				return "", "", "has no " + k + " profile"
			}
			return inc.Profile.Kind(k).File, "", ""
		}})
	}
	return out
}

// pprof serves one kind of pprof's web UI for an incident.
func (h *Handler) pprof(k pprofKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		inc, ok := h.cfg.Store.Incident(id)
		if !ok {
			h.notFound(w, "There is no incident "+id+".")
			return
		}
		file, base, missing := k.files(inc)
		if missing != "" {
			h.notFound(w, "Incident "+id+" "+missing+".")
			return
		}
		view := "/" + r.PathValue("view")
		if !pprofViews[view] {
			h.notFound(w, "pprof's "+view+" view is not served by the pager.")
			return
		}
		key, args := k.route+" "+file, []string{k.name}
		files := map[string]string{k.name: file}
		if base != "" {
			key, args = k.route+" "+base+" "+file, []string{"-diff_base=" + k.baseName, k.name}
			files[k.baseName] = base
		}
		handlers, err := h.views.get(r.Context(), key, func() (map[string]http.Handler, error) {
			profiles := map[string]*profile.Profile{}
			for name, file := range files {
				p, err := h.readProfile(file)
				if err != nil {
					return nil, err
				}
				profiles[name] = p
			}
			return buildPProf(profiles, args, h.cfg.Log.With().Str("incident", id).Logger())
		})
		if err != nil {
			h.cfg.Log.Error().Err(err).Str("incident", id).Msg("could not build the pprof web UI")
			h.renderError(w, http.StatusInternalServerError, "Could not read the incident's profile: see the pager's log.")
			return
		}
		handler := handlers[view]
		if handler == nil {
			h.notFound(w, "pprof has no "+view+" view.")
			return
		}
		handler.ServeHTTP(w, r)
	}
}

// readProfile reads a stored profile through the store's os.Root: only a
// regular file inside the profiles directory, whatever the journal says.
func (h *Handler) readProfile(file string) (*profile.Profile, error) {
	f, _, err := h.cfg.Store.OpenProfile(file)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	defer f.Close()
	_, p, err := pproftop.Read(f, pproftop.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("web: parsing %s: %w", file, err)
	}
	return p, nil
}

type errorPage struct {
	page
	Message string
}

func (h *Handler) notFound(w http.ResponseWriter, msg string) {
	h.renderError(w, http.StatusNotFound, msg)
}

func (h *Handler) renderError(w http.ResponseWriter, status int, msg string) {
	h.render(w, status, "error.html", errorPage{page: page{Title: http.StatusText(status) + " — burnlab pager"}, Message: msg})
}

// render executes into a buffer first, so a template error is a 500 and
// never half a page.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		h.cfg.Log.Error().Err(err).Str("template", name).Msg("could not render page")
		http.Error(w, "could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// formatValue says a profile's value in its sample type's unit: time for
// cpu and delay (nanoseconds), bytes for space, else a count.
func formatValue(sampleType string, v int64) string {
	switch sampleType {
	case "cpu", "delay":
		return time.Duration(v).String()
	case "alloc_space", "inuse_space":
		return formatBytes(v)
	}
	return strconv.FormatInt(v, 10)
}

func formatBytes(b int64) string {
	v, units := float64(b), []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for ; (v >= 1024 || v <= -1024) && i < len(units)-1; i++ {
		v /= 1024
	}
	if i == 0 {
		return fmt.Sprintf("%d B", b)
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

func formatTime(t any) string {
	switch t := t.(type) {
	case time.Time:
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return fmt.Sprint(t)
}

// formatRate is bytes per second in decimal units, as heapdelta's
// verdicts write them: "1.2 MB/s".
// formatShare is part as a whole percentage of whole.
func formatShare(part, whole float64) string {
	if whole <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", 100*part/whole)
}

// traceSplit says where a slow request's time went, if the flight
// recorder's snapshot taken with p holds it, and otherwise why not.
func traceSplit(p *incident.Profile, e incident.Exemplar) string {
	if p == nil || p.Trace == nil || p.Trace.File == "" {
		return "—"
	}
	if r, ok := p.Trace.Find(e.RequestID); ok {
		return r.Words()
	}
	if e.At.Before(p.Trace.From) {
		return "ended before the snapshot began"
	}
	return "not among the snapshot's slowest"
}

func formatRate(v float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for ; math.Abs(v) >= 999.95 && i < len(units)-1; i++ {
		v /= 1000
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B/s", v)
	}
	return fmt.Sprintf("%.1f %s/s", v, units[i])
}

func formatDuration(from time.Time, to *time.Time) string {
	if to == nil || to.IsZero() {
		return ""
	}
	return to.Sub(from).Round(time.Second).String()
}
