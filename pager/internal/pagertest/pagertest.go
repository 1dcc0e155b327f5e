// Package pagertest runs the pager's chain for its tests as the pager
// runs it: the webhook receiver, whose Sink is the lifecycle, the web UI
// and API, on one server, over a store in a directory of the test's.
package pagertest

import (
	"context"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/web"
	"burnlab/pager/internal/webhook"
	"burnlab/shared/incident"
	"burnlab/shared/syncbuf"
)

// Pager is a running chain.
type Pager struct {
	Srv       *httptest.Server
	Lifecycle *lifecycle.Lifecycle
	Store     *store.Store
	Logs      *syncbuf.Buffer
	Dir       string
	Reg       *prometheus.Registry
}

// New runs a pager whose data directory is dir, its lifecycle profiling
// profileURL and its webhook taking token; opts set more of the
// lifecycle's Config (its Store, Log, ProfileURL and a 5 s ProfileTimeout
// are set first), whose ExternalURL the webhook and the API use too. The
// test's end closes it.
func New(t *testing.T, dir, profileURL, token string, opts ...func(*lifecycle.Config)) *Pager {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := zerolog.New(logs)
	cfg := lifecycle.Config{Store: st, Log: log, ProfileURL: profileURL, ProfileTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	reg := prometheus.NewRegistry()
	l := lifecycle.New(cfg, reg)
	ui, err := web.New(web.Config{Store: st, Log: log, ExternalURL: cfg.ExternalURL})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/webhook/", webhook.New(webhook.Config{Sink: l, Log: log, Token: token, ExternalURL: cfg.ExternalURL}, reg))
	mux.Handle("/", ui)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		l.Close(context.Background())
		st.Close()
	})
	return &Pager{Srv: srv, Lifecycle: l, Store: st, Logs: logs, Dir: dir, Reg: reg}
}

// Post sends body to path with the header pairs given, and returns the
// answer's status and body.
func (p *Pager) Post(t *testing.T, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.Srv.URL+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Counter reads a counter of the pager's, the series of these labels: 0
// for one never counted, as a vector's series is before its first count.
func (p *Pager) Counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := p.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// All is every incident of the store, newest first.
func (p *Pager) All() []incident.Incident {
	return p.Store.List(store.Filter{}, 1, math.MaxInt).Incidents
}
