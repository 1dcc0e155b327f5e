package lifecycle_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"burnlab/pager/internal/alerttest"
	"burnlab/pager/internal/lifecycle"

	"burnlab/pager/internal/store"
	"burnlab/shared/pproftop/pproftoptest"
)

// fakeGateway stands in for the gateway's /debug/pprof/allocs: it answers
// each request with a real heap profile, counts the requests and the most
// it had in flight at once, and holds them until release is closed.
type fakeGateway struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   int // requests
	in  int // in flight
	max int // most in flight at once
	// reached is closed once `together` requests are in flight at once.
	together int
	hit      bool
	reached  chan struct{}
	release  chan struct{}
}

// newFakeGateway answers at once; holdFakeGateway holds the requests until
// the test closes release.
func newFakeGateway(t *testing.T) *fakeGateway {
	g := holdFakeGateway(t, 0)
	close(g.release)
	return g
}

func holdFakeGateway(t *testing.T, together int) *fakeGateway {
	prof := pproftoptest.HeapProfile(t)
	g := &fakeGateway{together: together, reached: make(chan struct{}), release: make(chan struct{})}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.n++
		g.in++
		g.max = max(g.max, g.in)
		if g.in == g.together && !g.hit {
			close(g.reached)
			g.hit = true
		}
		g.mu.Unlock()
		<-g.release
		w.Write(prof)
		g.mu.Lock()
		g.in--
		g.mu.Unlock()
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) url() string { return g.srv.URL + "/debug/pprof/allocs" }

func (g *fakeGateway) counts() (requests, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n, g.max
}

// fakeClock is the captures' time, moved on by the test; each Sleep that
// waits says when it wakes on asleep.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	asleep  chan time.Time
}

type fakeWaiter struct {
	at   time.Time
	wake chan struct{}
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, asleep: make(chan time.Time, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	w := fakeWaiter{at: c.now.Add(d), wake: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case c.asleep <- w.at:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-w.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		close(w.wake)
	}
	c.waiters = kept
}

// An alert storm costs the gateway one profile per window: 250 distinct
// pages over 50 s, one group of 200 and then 50 notifications of their own
// a second apart (some of them at once), make one fetch, and every
// incident refers to that one profile.
func TestAStormOfPagesSharesOneProfile(t *testing.T) {
	gw := newFakeGateway(t)
	clk := newFakeClock(time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC))
	p := newPagerIn(t, t.TempDir(), gw.url(), func(c *lifecycle.Config) { c.ProfileWindow, c.Clock = time.Minute, clk })
	start := time.Now().UTC().Truncate(time.Second)
	if status, body := p.post(t, "/webhook/page", alerttest.Group(200, start, 0)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	for i := 200; i < 250; i += 5 {
		clk.Advance(5 * time.Second)
		var wg sync.WaitGroup
		for j := i; j < i+5; j++ {
			wg.Go(func() {
				if status, body := p.post(t, "/webhook/page", notification(alerttest.SlothAlert(j, start))); status != 200 {
					t.Errorf("page %d: %d %s", j, status, body)
				}
			})
		}
		wg.Wait()
	}
	p.l.Close(context.Background())

	if n, _ := gw.counts(); n != 1 {
		t.Errorf("%d profile fetches from the gateway for 250 pages in one window, want 1", n)
	}
	first, _ := p.st.Incident(alerttest.SlothIncident(0, start))
	if first.Profile == nil || first.Profile.File == "" || first.Profile.Error != "" {
		t.Fatalf("first page's profile: %+v", first.Profile)
	}
	for i := range 250 {
		inc, _ := p.st.Incident(alerttest.SlothIncident(i, start))
		if inc.Profile == nil || inc.Profile.File != first.Profile.File {
			t.Fatalf("page %d: profile %+v, want the shared %s", i, inc.Profile, first.Profile.File)
		}
	}
	if n := p.st.Shares(first.Profile.File); n != 250 {
		t.Errorf("Shares(%s) = %d, want 250", first.Profile.File, n)
	}
	files, _ := os.ReadDir(p.Dir + "/profiles")
	if len(files) != 1 {
		t.Errorf("%d profile files, want 1", len(files))
	}
	if got := p.counter(t, "pager_profile_fetches_total", map[string]string{"result": "ok"}); got != 1 {
		t.Errorf("pager_profile_fetches_total{ok} = %v, want 1", got)
	}
	if got := p.counter(t, "pager_profiles_total", map[string]string{"when": "page", "result": "ok"}); got != 250 {
		t.Errorf("pager_profiles_total{page,ok} = %v, want 250", got)
	}
}

// Once the window has passed, the next page gets a profile of its own;
// resolves within a window share one profile after, which is taken no
// earlier than the resolves it serves: at the end of the window of the
// page-time one.
func TestWindowsAndTheProfileAfter(t *testing.T) {
	gw := newFakeGateway(t)
	clk := newFakeClock(time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC))
	p := newPagerIn(t, t.TempDir(), gw.url(), func(c *lifecycle.Config) { c.ProfileWindow, c.Clock = time.Minute, clk })
	start := time.Now().UTC().Truncate(time.Second)
	post := func(a map[string]any) {
		t.Helper()
		if status, body := p.post(t, "/webhook/page", notification(a)); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	resolved := func(i int) map[string]any {
		a := alerttest.SlothAlert(i, start)
		a["status"], a["endsAt"] = "resolved", start.Add(time.Minute).Format(time.RFC3339Nano)
		return a
	}
	post(alerttest.SlothAlert(0, start))
	post(alerttest.SlothAlert(1, start))
	clk.Advance(20 * time.Second)
	post(resolved(0))
	post(resolved(1))
	select {
	case at := <-clk.asleep:
		if !at.Equal(clk.Now().Add(40 * time.Second)) {
			t.Errorf("the profile after waits until %s, want the window's end, 40 s on", at)
		}
	case <-time.After(30 * time.Second): // a guard against hanging, not a measure
		t.Fatal("no capture after the resolves waits for the window's end")
	}
	if n, _ := gw.counts(); n != 1 {
		t.Fatalf("%d fetches before the window ended, want 1", n)
	}
	clk.Advance(40 * time.Second)
	p.l.Wait() // both resolves' captures are recorded
	clk.Advance(2 * time.Minute)
	post(alerttest.SlothAlert(2, start))
	p.l.Close(context.Background())

	if n, _ := gw.counts(); n != 3 {
		t.Errorf("%d fetches, want 3: the page-time one, the one after, the later page's", n)
	}
	a, _ := p.st.Incident(alerttest.SlothIncident(0, start))
	b, _ := p.st.Incident(alerttest.SlothIncident(1, start))
	c, _ := p.st.Incident(alerttest.SlothIncident(2, start))
	switch {
	case a.Profile == nil || a.After == nil || b.Profile == nil || b.After == nil || c.Profile == nil:
		t.Fatalf("profiles: %+v %+v %+v", a, b, c)
	case a.Profile.File != b.Profile.File || a.After.File != b.After.File:
		t.Errorf("pages and resolves within a window do not share: %s %s, %s %s", a.Profile.File, b.Profile.File, a.After.File, b.After.File)
	case a.After.File == a.Profile.File || c.Profile.File == a.Profile.File || c.Profile.File == a.After.File:
		t.Errorf("a later window reused a profile: %s %s %s", a.Profile.File, a.After.File, c.Profile.File)
	}
}

// Without a window each page fetches its own profile; no more than
// lifecycle.DefaultMaxFetches are in flight at the gateway at once, and that many are: the
// gateway holds every fetch until all pages are in and that many fetches
// are waiting at it.
func TestProfileFetchesInFlightAreBounded(t *testing.T) {
	const limit, pages = lifecycle.DefaultMaxFetches, 12
	gw := holdFakeGateway(t, limit)
	clk := newFakeClock(time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC))
	p := newPagerIn(t, t.TempDir(), gw.url(), func(c *lifecycle.Config) { c.Clock = clk })
	start := time.Now().UTC().Truncate(time.Second)
	for i := range pages {
		clk.Advance(time.Second)
		if status, body := p.post(t, "/webhook/page", notification(alerttest.SlothAlert(i, start))); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	<-gw.reached
	close(gw.release)
	p.l.Close(context.Background())
	n, most := gw.counts()
	if n != pages || most != limit {
		t.Errorf("%d fetches, at most %d in flight; want %d, and %d", n, most, pages, limit)
	}
}

// A resolve that arrives while its page's notification is still being
// handled (stored, not yet announced: the test holds it there) still gets
// its profile after, taken after the page-time one.
func TestAResolveRacingItsFiringGetsTheProfileAfter(t *testing.T) {
	gw := holdFakeGateway(t, 1)
	stored, release := make(chan struct{}), make(chan struct{})
	p := newPagerIn(t, t.TempDir(), gw.url(), func(c *lifecycle.Config) {
		c.OnStored = func(acc []store.Accepted) {
			if len(acc) == 1 && acc[0].Fired {
				close(stored)
				<-release
			}
		}
	})
	start := time.Now().UTC().Truncate(time.Second)
	firing, resolved := alerttest.SlothAlert(0, start), alerttest.SlothAlert(0, start)
	resolved["status"], resolved["endsAt"] = "resolved", start.Add(time.Minute).Format(time.RFC3339Nano)
	paged := make(chan int)
	go func() {
		status, _ := p.post(t, "/webhook/page", notification(firing))
		paged <- status
	}()
	<-stored
	if status, body := p.post(t, "/webhook/page", notification(resolved)); status != 200 {
		t.Fatalf("resolve: %d %s", status, body)
	}
	close(release)
	if status := <-paged; status != 200 {
		t.Fatalf("page: %d", status)
	}
	<-gw.reached // the page-time fetch, held at the gateway
	close(gw.release)
	p.l.Close(context.Background())

	inc, _ := p.st.Incident(alerttest.SlothIncident(0, start))
	if inc.Profile == nil || inc.Profile.File == "" || inc.After == nil || inc.After.File == "" {
		t.Fatalf("profiles: page time %v, after %v", inc.Profile != nil, inc.After != nil)
	}
	if inc.After.File == inc.Profile.File || inc.After.TakenAt.Before(inc.Profile.TakenAt) {
		t.Errorf("after %s at %s is not taken after the page-time %s at %s", inc.After.File, inc.After.TakenAt, inc.Profile.File, inc.Profile.TakenAt)
	}
	if n, _ := gw.counts(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// A page that fires and resolves within one notification gets both
// profiles too.
func TestAPageFiredAndResolvedInOneNotificationGetsBothProfiles(t *testing.T) {
	gw := newFakeGateway(t)
	p := newPager(t, gw.url())
	start := time.Now().UTC().Truncate(time.Second)
	firing, resolved := alerttest.SlothAlert(0, start), alerttest.SlothAlert(0, start)
	resolved["status"], resolved["endsAt"] = "resolved", start.Add(time.Minute).Format(time.RFC3339Nano)
	if status, body := p.post(t, "/webhook/page", notification(firing, resolved)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())
	if inc, _ := p.st.Incident(alerttest.SlothIncident(0, start)); inc.Profile == nil || inc.After == nil || inc.After.File == inc.Profile.File {
		t.Fatalf("profiles: page time %v, after %v", inc.Profile != nil, inc.After != nil)
	}
}
