package lifecycle_test

import (
	"testing"

	"go.uber.org/goleak"

	"burnlab/pager/internal/alerttest"
	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/pagertest"
	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop/pproftoptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	alert        = alerttest.Alert
	fingerprint  = alerttest.Fingerprint
	with         = alerttest.With
	notification = alerttest.Notification
)

// pager is the pager's chain (pagertest), its lifecycle the one under test.
type pager struct {
	*pagertest.Pager
	l  *lifecycle.Lifecycle
	st *store.Store
}

func newPager(t *testing.T, profileURL string) *pager {
	t.Helper()
	return newPagerIn(t, t.TempDir(), profileURL)
}

// newPagerIn is a pager whose data directory is dir, profiling
// profileURL; opts set more of the lifecycle's Config.
func newPagerIn(t *testing.T, dir, profileURL string, opts ...func(*lifecycle.Config)) *pager {
	t.Helper()
	p := pagertest.New(t, dir, profileURL, "", opts...)
	return &pager{Pager: p, l: p.Lifecycle, st: p.Store}
}

func (p *pager) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	return p.Post(t, path, body)
}

func (p *pager) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return p.Counter(t, name, labels)
}

// all is every incident of st, newest first.
func all(st *store.Store) []incident.Incident {
	return st.List(store.Filter{}, 1, 1<<30).Incidents
}

// gatewayPprof is a gateway's pprof endpoint (pproftoptest.Server).
var gatewayPprof = pproftoptest.Server
