package promfacts

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The pager asks Prometheus for its active targets only, and reads a
// bounded answer: a cluster's whole list, dropped targets and all, can be
// tens of MB, asked once a second while a job has none yet.
func TestTargetsAreTheActiveOnesReadBounded(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/targets" || r.URL.Query().Get("state") != "active" {
			http.Error(w, "want /api/v1/targets?state=active", http.StatusBadRequest)
			return
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	body = `{"status":"success","data":{"activeTargets":[{"labels":{"job":"gateway","instance":"a:6060"},"scrapeUrl":"http://a:6060/metrics","health":"up"}],"droppedTargets":[]}}`
	res, err := c.Targets(context.Background())
	if err != nil || len(res.Active) != 1 || res.Active[0].Labels["job"] != "gateway" || res.Active[0].ScrapeURL != "http://a:6060/metrics" {
		t.Fatalf("targets %+v, %v", res, err)
	}
	body = `{"status":"success","data":{"activeTargets":[` + strings.Repeat(`{"labels":{"job":"x"}},`, maxTargetsBytes/20) + `]}}`
	if _, err := c.Targets(context.Background()); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a list over the bound: %v", err)
	}
	body = `{"status":"error","error":"unavailable"}`
	if _, err := c.Targets(context.Background()); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("an error answer: %v", err)
	}
}
