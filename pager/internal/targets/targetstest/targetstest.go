// Package targetstest stands in for Prometheus's target discovery in the
// pager's tests.
package targetstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Prometheus stands in for a real Prometheus's /api/v1/targets: it
// answers with the active targets given, in Prometheus's JSON (the fields
// the pager reads; a real one sends more), read by client_golang's real
// API client. Each target
// is scraped on its server's port and carries its pprof port as a
// discovered label, as a Kubernetes pod annotation would.
func Prometheus(t *testing.T, jobs map[string][]*httptest.Server) v1.API {
	var active []map[string]any
	for job, srvs := range jobs {
		for i, s := range srvs {
			u, _ := url.Parse(s.URL)
			active = append(active, map[string]any{
				"discoveredLabels": map[string]string{"__address__": u.Host, "__meta_pprof_port": u.Port()},
				"labels":           map[string]string{"job": job, "instance": fmt.Sprintf("%s-%d", job, i)},
				"scrapePool":       job, "scrapeUrl": s.URL + "/metrics", "health": "up",
			})
		}
	}
	body, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"activeTargets": active, "droppedTargets": []any{}}})
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/targets" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(prom.Close)
	c, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(c)
}
