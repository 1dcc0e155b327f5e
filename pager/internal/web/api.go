package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/openai"
)

// IncidentURL is an incident's page in the web UI (the route "GET
// /incidents/{id}" New serves) under base, the pager's external URL: the
// API's incidents, the webhook's log lines and the lifecycle's findings
// link to it. "" without a base.
func IncidentURL(base, id string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/incidents/" + url.PathEscape(id)
}

// apiError answers an API request in the error shape every burnlab
// process uses (OpenAI's): the API refuses only a request's mistakes.
func apiError(w http.ResponseWriter, status int, msg string) {
	openai.WriteError(w, status, "invalid_request_error", msg)
}

// listIncidents serves one page of the incidents, newest first, as a JSON
// array as it always was: a client that reads the array gets the newest
// store.PageSize. The query takes page and the filters store.ParseQuery
// reads; the Link header (RFC 8288) names the first, previous, next and
// last pages, and X-Total-Count how many incidents the filter takes.
func (h *Handler) listIncidents(w http.ResponseWriter, r *http.Request) {
	f, number, err := store.ParseQuery(r.URL.Query())
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	page := h.cfg.Store.List(f, number, store.PageSize)
	if page.Number > page.Pages {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("page %d is past the last, %d", page.Number, page.Pages))
		return
	}
	for i := range page.Incidents {
		page.Incidents[i].URL = IncidentURL(h.cfg.ExternalURL, page.Incidents[i].ID)
	}
	link := func(n int, rel string) string {
		return fmt.Sprintf(`<%s>; rel="%s"`, (&url.URL{Path: r.URL.Path, RawQuery: f.Values(n).Encode()}).String(), rel)
	}
	links := []string{link(1, "first")}
	if page.Number > 1 {
		links = append(links, link(page.Number-1, "prev"))
	}
	if page.Number < page.Pages {
		links = append(links, link(page.Number+1, "next"))
	}
	links = append(links, link(page.Pages, "last"))
	w.Header().Set("Link", strings.Join(links, ", "))
	w.Header().Set("X-Total-Count", strconv.Itoa(page.Total))
	w.Header().Set("Content-Type", "application/json")
	if page.Incidents == nil {
		page.Incidents = []incident.Incident{}
	}
	json.NewEncoder(w).Encode(page.Incidents)
}

func (h *Handler) getIncident(w http.ResponseWriter, r *http.Request) {
	inc, ok := h.cfg.Store.Incident(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "no incident "+r.PathValue("id"))
		return
	}
	inc.URL = IncidentURL(h.cfg.ExternalURL, inc.ID)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(inc)
}

// getProfile serves the stored pprof profile of an incident, for
// `go tool pprof` and the Grafana plugin's flame graph.
func (h *Handler) getProfile(w http.ResponseWriter, r *http.Request) {
	h.serveProfile(w, r, "profile", func(inc incident.Incident) string {
		if inc.Profile == nil {
			return ""
		}
		return inc.Profile.File
	})
}

// getKind serves the profile of another kind taken with the page-time
// heap profile (a cpu profile, say).
func (h *Handler) getKind(w http.ResponseWriter, r *http.Request) {
	kind := r.PathValue("kind")
	h.serveProfile(w, r, kind+" profile", func(inc incident.Incident) string {
		if inc.Profile == nil || inc.Profile.Kind(kind) == nil {
			return ""
		}
		return inc.Profile.Kind(kind).File
	})
}

// getDelta serves one of the two delta heap profiles an incident's facts
// compare: "before" the burn or "during" it.
func (h *Handler) getDelta(w http.ResponseWriter, r *http.Request) {
	which := r.PathValue("which")
	if which != "before" && which != "during" {
		apiError(w, http.StatusNotFound, "no delta profile "+which+": want before or during")
		return
	}
	h.serveProfile(w, r, which+" delta profile", func(inc incident.Incident) string {
		if inc.Facts == nil || inc.Facts.Heap == nil {
			return ""
		}
		if which == "before" {
			return inc.Facts.Heap.BeforeFile
		}
		return inc.Facts.Heap.DuringFile
	})
}

// serveProfile serves the profile file of the incident that file names:
// see store.OpenProfile for why the journal's file name is not trusted.
func (h *Handler) serveProfile(w http.ResponseWriter, r *http.Request, what string, file func(incident.Incident) string) {
	id := r.PathValue("id")
	inc, ok := h.cfg.Store.Incident(id)
	name := ""
	if ok {
		name = file(inc)
	}
	if name == "" {
		apiError(w, http.StatusNotFound, "no "+what+" for incident "+id)
		return
	}
	f, fi, err := h.cfg.Store.OpenProfile(name)
	if err != nil {
		h.cfg.Log.Warn().Err(err).Str("incident", id).Str("what", what).Msg("not serving the incident's profile")
		apiError(w, http.StatusNotFound, "no "+what+" for incident "+id)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// getTrace serves an incident's page-time flight-recorder snapshot, for
// `go tool trace`.
func (h *Handler) getTrace(w http.ResponseWriter, r *http.Request) {
	h.serveProfile(w, r, "flight-recorder trace", func(inc incident.Incident) string {
		if inc.Profile == nil || inc.Profile.Trace == nil {
			return ""
		}
		return inc.Profile.Trace.File
	})
}
