//go:build e2e

package compose

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"burnlab/prometheus/rulegen/nodata"
	"burnlab/shared/incident"
	"burnlab/shared/scenario"
	"burnlab/stack/lab"
)

// The monitoring path's faults run on the compose e2e's stack, after its
// story, with docker's own controls (kill, stop, pause, network
// disconnect, restart) and, for a crash the restart policy must answer, a
// kill -9 of the process (see crash): no proxy stands in the alert path.
//
// Every cycle burns availability the same way: the upstream-errors fault at
// faultShare, 30x the 0.1 % budget, from a clear quick page pair. The quick
// pair (14.4x over 1m, confirmed over 30s) fires after about 29 s of it,
// plus a scrape and an evaluation; the burn is held until the page reaches
// the pager, so the slow pair (6x over 4m and 2m) fires too, and the page
// resolves once the 2-minute window falls under 6x: about 96 s after the
// clear (2m·(1 − 6/30)), plus Alertmanager's group_interval. The
// reference cycle is the compose e2e's scenario step; each fault is
// measured against it.
const (
	faultShare   = 0.03
	faultWithin  = 3 * time.Minute // any one wait: the slowest, a resolve through the slow pair, takes about 2
	fastPoll     = time.Second
	midBurn      = 10 * time.Second // into the burst: before the page can fire
	amsDownAfter = 60 * time.Second // the "until 60 s after" the fire
	pagerPaused  = 45 * time.Second // past group_wait + peer_timeout: both replicas try
	pagerCut     = 40 * time.Second
	rejoinQuiet  = 20 * time.Second // after a replica rejoins, nothing more may arrive
	burstAlerts  = 400
	burstWorkers = 8
)

// faultRow is one row of the table: what each fault did to the page,
// measured as the reference was.
type faultRow struct {
	fault string
	// fire and page are from the burst's start (Prometheus firing, the
	// pager's incident); resolve is from the clear. Zero: not measured.
	fire, page, resolve time.Duration
	// received counts page notifications the pager accepted (firing and
	// resolved), duplicates the repeats it dropped, incidents the page
	// incidents opened, lost what was acknowledged and not stored.
	received, duplicates, incidents, lost int
	note                                  string
}

// cycle is one burst of availability errors, followed from the upstream
// to the pager.
type cycle struct {
	t      *testing.T
	s      *stack
	probe  lab.Probe
	known  map[string]bool
	counts pagerCounts
	start  time.Time
	fired  time.Time
	paged  time.Time
	clear  time.Time
	done   time.Time
	inc    incident.Incident
}

func (s *stack) beginCycle(t *testing.T, probe lab.Probe) *cycle {
	t.Helper()
	c := &cycle{t: t, s: s, probe: probe, known: map[string]bool{}}
	// A failed cycle clears its fault, and each cycle waits for a quiet
	// availability SLO, so one failure does not become the next's.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if err := scenario.Set(context.Background(), "http://"+probe.Addrs.Upstream, scenario.None); err != nil {
			t.Logf("clearing the fault after the failure: %v", err)
		}
	})
	poll(t, s, "a quiet availability SLO before the cycle", func() bool {
		alerts, err := probe.Alerts()
		if err != nil || hasAlert(alerts, scenario.Availability, scenario.Page) {
			return false
		}
		incs, err := probe.Incidents()
		return err == nil && !slices.ContainsFunc(incs, func(i incident.Incident) bool {
			return i.SLO == scenario.Availability && i.Severity == scenario.Page && i.Status == "firing"
		})
	})
	incs, err := probe.Incidents()
	if err != nil {
		t.Fatalf("the pager: %v", err)
	}
	for _, inc := range incs {
		c.known[inc.ID] = true
	}
	c.counts = readPager(t)
	return c
}

// burst injects the fault through make scenario's own code.
func (c *cycle) burst(ctx context.Context) {
	c.t.Helper()
	st := lab.DefaultStack()
	st.Compose, st.Out, st.Share = c.s.command(), io.Discard, faultShare
	if err := lab.ApplyScenario(ctx, "upstream-errors", st); err != nil {
		c.t.Fatal(err)
	}
	c.start = time.Now()
}

func (c *cycle) stop(ctx context.Context) {
	c.t.Helper()
	if err := scenario.Set(ctx, "http://"+c.probe.Addrs.Upstream, scenario.None); err != nil {
		c.t.Fatal(err)
	}
	c.clear = time.Now()
}

// waitFire waits for Prometheus to fire availability's page; a Prometheus
// that is restarting does not answer meanwhile.
func (c *cycle) waitFire() {
	c.t.Helper()
	c.fired = poll(c.t, c.s, "Prometheus firing the availability page", func() bool {
		alerts, err := c.probe.Alerts()
		return err == nil && hasAlert(alerts, scenario.Availability, scenario.Page)
	})
}

// waitPage waits for a new availability page at the pager.
func (c *cycle) waitPage() {
	c.t.Helper()
	c.paged = poll(c.t, c.s, "a new availability page at the pager", func() bool {
		for _, inc := range c.newPages() {
			if inc.Status == "firing" {
				c.inc = inc
				return true
			}
		}
		return false
	})
}

func (c *cycle) waitResolved() {
	c.t.Helper()
	c.done = poll(c.t, c.s, "the page resolved at the pager", func() bool {
		inc, err := c.probe.Incident(c.inc.ID)
		return err == nil && inc.Status == "resolved"
	})
}

// newPages are the availability pages opened since the cycle began.
func (c *cycle) newPages() []incident.Incident {
	incs, err := c.probe.Incidents()
	if err != nil {
		return nil
	}
	var out []incident.Incident
	for _, inc := range incs {
		if !c.known[inc.ID] && inc.SLO == scenario.Availability && inc.Severity == scenario.Page {
			out = append(out, inc)
		}
	}
	return out
}

// row measures the cycle and holds it to exactly once: one page incident,
// one firing and one resolved event on its timeline.
func (c *cycle) row(fault string) faultRow {
	c.t.Helper()
	now := readPager(c.t)
	r := faultRow{fault: fault, fire: c.fired.Sub(c.start), page: c.paged.Sub(c.start),
		received:   int(now.page - c.counts.page),
		duplicates: int(now.duplicates - c.counts.duplicates),
		incidents:  len(c.newPages())}
	if !c.done.IsZero() {
		r.resolve = c.done.Sub(c.clear)
	}
	inc, err := c.probe.Incident(c.inc.ID)
	if err != nil {
		c.t.Fatal(err)
	}
	var firing, resolved int
	for _, e := range inc.Timeline {
		switch e.Kind {
		case incident.Firing:
			firing++
		case incident.Resolved:
			resolved++
		}
	}
	wantResolved := 0
	if !c.done.IsZero() {
		wantResolved = 1
	}
	if r.incidents != 1 || firing != 1 || resolved != wantResolved {
		c.t.Errorf("%s: %d page incidents, the page's timeline has %d firing and %d resolved events; want exactly one page, notified once (and resolved once)",
			fault, r.incidents, firing, resolved)
	}
	return r
}

// poll calls ok every second until it holds, and returns when it did.
func poll(t *testing.T, s *stack, what string, ok func() bool) time.Time {
	t.Helper()
	for deadline := time.Now().Add(faultWithin); ; time.Sleep(fastPoll) {
		if ok() {
			return time.Now()
		}
		if time.Now().After(deadline) {
			s.dump(context.Background())
			t.Fatalf("waited %s for %s: it did not come", faultWithin, what)
		}
	}
}

// pagerCounts are the pager's own counters.
type pagerCounts struct{ page, duplicates float64 }

func readPager(t *testing.T) pagerCounts {
	t.Helper()
	mfs, err := scrape("http://" + lab.DefaultAddrs().Pager + "/metrics")
	if err != nil {
		t.Fatalf("the pager's metrics: %v", err)
	}
	return pagerCounts{
		page:       sum(mfs["pager_notifications_total"], map[string]string{"severity": "page"}),
		duplicates: sum(mfs["pager_duplicate_notifications_total"], nil),
	}
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// sum adds the counters of a family whose labels include match.
func sum(mf *dto.MetricFamily, match map[string]string) float64 {
	var total float64
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if ok {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// amCounter reads a webhook counter of each Alertmanager replica, inside
// its container, where the second replica's port is not published.
func (s *stack) amCounter(ctx context.Context, name string) [2]float64 {
	var out [2]float64
	for i, svc := range []string{lab.Alertmanager, lab.Alertmanager2} {
		text, err := s.run(ctx, "exec", "-T", svc, "wget", "-q", "-O", "-", "http://127.0.0.1:9093/metrics")
		if err != nil {
			s.t.Fatalf("%s's metrics: %v\n%s", svc, err, tail(text, 5))
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			s.t.Fatalf("%s's metrics: %v", svc, err)
		}
		out[i] = sum(mfs[name], map[string]string{"integration": "webhook"})
	}
	return out
}

// amFailures is the failed webhook attempts of both replicas: each one a
// retry to come.
func (s *stack) amFailures(ctx context.Context) float64 {
	f := s.amCounter(ctx, "alertmanager_notification_requests_failed_total")
	return f[0] + f[1]
}

// dockerDo runs one docker control on a service's container.
func (s *stack) dockerDo(ctx context.Context, service string, args ...string) {
	s.t.Helper()
	id := s.ids(ctx)[service]
	if id == "" {
		s.t.Fatalf("no %s container", service)
	}
	if out, err := docker(ctx, append(args, id)...); err != nil {
		s.t.Fatalf("docker %s %s: %v\n%s", strings.Join(args, " "), service, err, out)
	}
}

// crash kills a service's process with SIGKILL from the host, as the
// kernel's OOM killer or a fault would. Not `docker kill`: the engine
// takes that for a manual stop and does not apply the restart policy
// (Docker 20.10 sets HasBeenManuallyStopped on a kill), while a process
// that dies by itself is restarted.
// It returns the container's ID and the process it killed.
func (s *stack) crash(ctx context.Context, service string) (id string, pid int) {
	s.t.Helper()
	c := s.inspect(ctx, service)
	if pid = c.State.Pid; pid <= 0 {
		s.t.Fatalf("%s has no process to kill", service)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		s.t.Fatalf("kill -9 %s's process %d: %v (the test needs to run as root or as the container's user)", service, pid, err)
	}
	return c.ID, pid
}

// waitRestarted waits until container id runs a process other than pid,
// the one crash killed. Until the engine has handled that exit, the
// container still reads as running, with its old health ("healthy"), and
// while it restarts compose ps may not list it: a wait on health alone can
// end before the restart has begun. It fails t, the subtest that waits.
func (s *stack) waitRestarted(t *testing.T, ctx context.Context, id string, pid int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(fastPoll) {
		out, err := docker(ctx, "inspect", "--format", "{{.State.Pid}}", id)
		if now, _ := strconv.Atoi(strings.TrimSpace(out)); err == nil && now > 0 && now != pid {
			return
		}
		if time.Now().After(deadline) {
			s.dump(ctx)
			t.Fatalf("container %.12s runs no new process within %s of its kill -9 (pid %d): %v %s", id, within, pid, err, out)
		}
	}
}

// gatewaySamples counts Prometheus's up{job="gateway"} samples in the
// window before at: 12 a minute when every scrape landed.
func gatewaySamples(t *testing.T, probe lab.Probe, window time.Duration, at time.Time) int {
	t.Helper()
	v, err := probe.QueryAt(fmt.Sprintf(`count_over_time(up{job="gateway"}[%s])`, model.Duration(window)), at)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range v {
		return int(n)
	}
	return 0
}

// runFaults checks that the no-data alert never fired since the stack
// came up, runs the no-fault reference cycle and then every fault, and
// returns the table's rows, the reference's first.
func (s *stack) runFaults(t *testing.T, ctx context.Context, probe lab.Probe, since time.Time, tl *timeline) []faultRow {
	// Silent so far, through the baseline's page, make fixed and its
	// resolve: no healthy run may page for missing data.
	// (Pending is fine: Prometheus's first seconds, before Sloth's
	// recordings have two samples, are the 30 s "for:" it waits out.)
	if v, err := probe.Query(fmt.Sprintf(`count_over_time(ALERTS{alertname=%q,alertstate="firing"}[%s])`, nodata.AlertName, model.Duration(time.Since(since).Round(time.Second)))); err != nil || len(v) != 0 {
		t.Errorf("%s fired in the healthy part of the run: %v %v", nodata.AlertName, v, err)
	}

	// The reference: no fault, through make scenario's own code. The HA
	// pair is up: the first replica sends, the second finds its
	// notification in the gossiped log and stays quiet.
	c := s.beginCycle(t, probe)
	sent := s.amCounter(ctx, "alertmanager_notifications_total")
	c.burst(ctx)
	c.waitFire()
	c.waitPage()
	c.stop(ctx)
	c.waitResolved()
	after := s.amCounter(ctx, "alertmanager_notifications_total")
	ref := c.row("none (the reference)")
	ref.note = fmt.Sprintf("make scenario S=upstream-errors SHARE=%g; the replicas sent %.0f and %.0f notifications", faultShare, after[0]-sent[0], after[1]-sent[1])
	tl.mark("REFERENCE " + ref.String())
	if ref.received != 2 || ref.duplicates != 0 {
		t.Errorf("the HA pair delivered %d page notifications and %d duplicates for one page and its resolve; want 2 and 0", ref.received, ref.duplicates)
	}
	rows := []faultRow{ref}
	network := project + "_default"

	// Alertmanager: both stopped from before the fire until 60 s after it,
	// and Prometheus killed mid-burn on the way; then one replica killed
	// while the page fires, and the resolve must come through the other.
	t.Run("alertmanagers-and-prometheus", func(t *testing.T) {
		// Whatever fails here, the next faults find the path whole.
		t.Cleanup(func() {
			if out, err := s.run(ctx, "start", lab.Prometheus, lab.Alertmanager, lab.Alertmanager2); err != nil {
				t.Errorf("start: %v\n%s", err, out)
			}
		})
		c := s.beginCycle(t, probe)
		if out, err := s.run(ctx, "stop", lab.Alertmanager, lab.Alertmanager2); err != nil {
			t.Fatalf("stop: %v\n%s", err, out)
		}
		c.burst(ctx)
		time.Sleep(midBurn)
		killed := time.Now()
		s.crash(ctx, lab.Prometheus)
		// Back within a minute, or its restart policy did not act.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(fastPoll) {
			if _, err := probe.Alerts(); err == nil {
				break
			}
			if time.Now().After(deadline) {
				s.dump(ctx)
				t.Fatalf("Prometheus is not back a minute after its kill -9: does its restart policy still restart it?")
			}
		}
		tl.mark(fmt.Sprintf("Prometheus answers again %s after its kill -9", time.Since(killed).Round(time.Second)))
		c.waitFire()
		time.Sleep(amsDownAfter)
		if out, err := s.run(ctx, "start", lab.Alertmanager, lab.Alertmanager2); err != nil {
			t.Fatalf("start: %v\n%s", err, out)
		}
		returned := time.Now()
		c.waitPage()
		// The minute around the kill, and the 10 s before it: those
		// samples were in the head block only, so only the WAL kept them.
		around := gatewaySamples(t, probe, time.Minute, killed.Add(30*time.Second))
		before := gatewaySamples(t, probe, midBurn, killed)
		if before == 0 {
			t.Errorf("no gateway sample from before Prometheus's kill survived its restart: the WAL was not replayed")
		}
		// One replica killed while the page fires; docker kill keeps it
		// down (a manual stop to the engine) until it is started again.
		s.dockerDo(ctx, lab.Alertmanager, "kill", "-s", "KILL")
		c.stop(ctx)
		c.waitResolved()
		if out, err := s.run(ctx, "start", lab.Alertmanager); err != nil {
			t.Fatalf("start: %v\n%s", err, out)
		}
		time.Sleep(rejoinQuiet)
		base := c.row("")
		prom, both, one := base, base, base
		prom.fault, prom.page, prom.resolve = "Prometheus kill -9 mid-burn", 0, 0
		prom.note = fmt.Sprintf("back by its restart policy; %d of 12 gateway samples in the minute of the kill, the %d before it kept (WAL)", around, before)
		both.fault, both.fire, both.page, both.resolve = "both Alertmanagers stopped", 0, c.paged.Sub(returned), 0
		both.note = "until 60 s after the fire; the page counted from their return (Prometheus re-sends firing alerts every minute)"
		one.fault, one.fire, one.page = "one Alertmanager kill -9 while firing", 0, 0
		one.note = "the resolve came through the other replica; nothing more once the killed one rejoined"
		for _, r := range []faultRow{prom, both, one} {
			tl.mark("FAULT " + r.String())
		}
		rows = append(rows, prom, both, one)
	})

	// The gateway restarted mid-burn (in-flight streams cut off), and the
	// pager frozen when Alertmanager sends the page, then cut from the
	// network when it sends the resolve.
	t.Run("gateway-restart-and-pager", func(t *testing.T) {
		t.Cleanup(func() {
			id := s.ids(ctx)[lab.Pager]
			docker(ctx, "unpause", id)
			docker(ctx, "network", "connect", "--alias", lab.Pager, network, id)
		})
		c := s.beginCycle(t, probe)
		failedBefore := s.amFailures(ctx)
		c.burst(ctx)
		time.Sleep(midBurn)
		s.dockerDo(ctx, lab.Gateway, "restart", "--time", "0")
		restarted := time.Now()
		c.waitFire()
		gw := c.row0("the gateway restarted mid-burn", ref, restarted, probe)
		gw.note += " (one cycle with the next row, whose counts it shares)"
		s.dockerDo(ctx, lab.Pager, "pause")
		time.Sleep(pagerPaused)
		s.dockerDo(ctx, lab.Pager, "unpause")
		unpaused := time.Now()
		c.waitPage()
		c.stop(ctx)
		poll(t, s, "Prometheus resolving the availability page", func() bool {
			alerts, err := probe.Alerts()
			return err == nil && !hasAlert(alerts, scenario.Availability, scenario.Page)
		})
		cut := s.ids(ctx)[lab.Pager]
		if out, err := docker(ctx, "network", "disconnect", network, cut); err != nil {
			t.Fatalf("network disconnect: %v\n%s", err, out)
		}
		time.Sleep(pagerCut)
		if out, err := docker(ctx, "network", "connect", "--alias", lab.Pager, network, cut); err != nil {
			t.Fatalf("network connect: %v\n%s", err, out)
		}
		reconnected := time.Now()
		c.waitResolved()
		retries := s.amFailures(ctx) - failedBefore
		pg := c.row("the pager paused, then cut off")
		pg.fire = 0
		pg.page, pg.resolve = c.paged.Sub(unpaused), c.done.Sub(reconnected)
		pg.note = fmt.Sprintf("paused %s when the page was sent, disconnected %s when the resolve was; %.0f failed attempts retried; delays from unpause and reconnect", pagerPaused, pagerCut, retries)
		tl.mark("FAULT " + gw.String())
		tl.mark("FAULT " + pg.String())
		if retries == 0 {
			t.Errorf("the Alertmanagers retried nothing while the pager was paused or cut off: the fault did not hit the alert path")
		}
		rows = append(rows, gw, pg)
	})

	return rows
}

// row0 is the gateway-restart row: when Prometheus fired against the
// reference, and what each side counted of the streams the restart cut.
func (c *cycle) row0(fault string, ref faultRow, restarted time.Time, probe lab.Probe) faultRow {
	c.t.Helper()
	window := model.Duration(time.Since(restarted) + 10*time.Second)
	count := func(q string) float64 {
		v, err := probe.Query(q)
		if err != nil {
			c.t.Fatal(err)
		}
		var n float64
		for _, x := range v {
			n += x
		}
		return n
	}
	client := count(fmt.Sprintf(`sum(increase(loadgen_streams_total{outcome!="ok"}[%s]))`, window))
	counted := count(fmt.Sprintf(`sum(increase(gateway_stream_duration_seconds_count{outcome="upstream_error"}[%s]))`, window))
	return faultRow{fault: fault, fire: c.fired.Sub(c.start),
		note: fmt.Sprintf("restarted %s into the burst with in-flight streams cut off; the loadgen saw %.0f streams fail, the gateway's SLI counted %.0f (it cannot count what its killed process was serving)",
			midBurn, client, counted)}
}

// burstAndKill posts burstAlerts distinct ticket notifications to the
// pager, as Alertmanager would, from burstWorkers at once, and kills the
// pager once a third are acknowledged. It returns the incidents of the
// acknowledged ones, how many were sent, and the pager's container and
// the process killed in it (pid 0 if the burst ended first).
func (s *stack) burstAndKill(t *testing.T, ctx context.Context) (acked []string, sent int, id string, pid int) {
	url := "http://" + lab.DefaultAddrs().Pager + "/webhook/ticket"
	var mu sync.Mutex
	var n, tries atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now().UTC().Truncate(time.Second)
	for range burstWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				fp := make([]byte, 8)
				rand.Read(fp)
				a := map[string]any{"status": "firing", "fingerprint": hex.EncodeToString(fp), "startsAt": start,
					"labels": map[string]string{"alertname": "BurnlabBurst", "severity": "ticket", "n": fmt.Sprint(i)}}
				body, _ := json.Marshal(map[string]any{"version": "4", "status": "firing", "receiver": "pager-ticket", "alerts": []any{a}})
				tries.Add(1)
				resp, err := client.Post(url, "application/json", strings.NewReader(string(body)))
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					mu.Lock()
					acked = append(acked, fmt.Sprintf("%s-%d", a["fingerprint"], start.Unix()))
					mu.Unlock()
					n.Add(1)
				}
			}
		}()
	}
	killed := false
	for i := range burstAlerts {
		jobs <- i
		if !killed && n.Load() >= burstAlerts/3 {
			killed = true
			id, pid = s.crash(ctx, lab.Pager)
		}
	}
	close(jobs)
	wg.Wait()
	slices.Sort(acked)
	return acked, int(tries.Load()), id, pid
}

var faultColumns = []string{"fault", "fire", "page", "resolve", "page notifications", "duplicates dropped", "incidents", "lost", "note"}

func (r faultRow) cells() []string {
	d := func(x time.Duration) string {
		if x == 0 {
			return "—"
		}
		return x.Round(time.Second).String()
	}
	return []string{r.fault, d(r.fire), d(r.page), d(r.resolve), fmt.Sprint(r.received), fmt.Sprint(r.duplicates), fmt.Sprint(r.incidents), fmt.Sprint(r.lost), r.note}
}

// String is the row in a line, for the timeline.
func (r faultRow) String() string {
	c := r.cells()
	var parts []string
	for i, name := range faultColumns[1:] {
		parts = append(parts, name+" "+c[i+1])
	}
	return c[0] + ": " + strings.Join(parts[:len(parts)-1], ", ") + "; " + c[len(c)-1]
}

// faultTable is the table as text (markdown false) or as docs/compose.md's
// Markdown.
func faultTable(rows []faultRow, markdown bool) string {
	var b strings.Builder
	if markdown {
		b.WriteString("| " + strings.Join(faultColumns, " | ") + " |\n|" + strings.Repeat("---|", len(faultColumns)) + "\n")
		for _, r := range rows {
			b.WriteString("| " + strings.Join(r.cells(), " | ") + " |\n")
		}
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(faultColumns, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	tw.Flush()
	return b.String()
}

// quietFaults are the faults whose rows count no page notification, so
// another alert may fire beside them (the compose e2e's provider page
// does): the gateway's scrape down and the pager killed under a burst of
// ticket notifications. beside runs between the two, after the scrape's
// fault: the pager's kill would lose the delta heap profiles a page's
// verdict reads.
func (s *stack) quietFaults(t *testing.T, ctx context.Context, probe lab.Probe, tl *timeline, beside func()) []faultRow {
	var rows []faultRow
	// The gateway's metrics unreachable: its container frozen, so every
	// scrape times out and the SLI's series have no samples.
	t.Run("gateway-scrape-down", func(t *testing.T) {
		t.Cleanup(func() { docker(ctx, "unpause", s.ids(ctx)[lab.Gateway]) })
		known := map[string]bool{}
		incs, _ := probe.Incidents()
		for _, inc := range incs {
			known[inc.ID] = true
		}
		s.dockerDo(ctx, lab.Gateway, "pause")
		paused := time.Now()
		var nd incident.Incident
		paged := poll(t, s, nodata.AlertName+" at the pager", func() bool {
			incs, err := probe.Incidents()
			if err != nil {
				return false
			}
			for _, inc := range incs {
				if !known[inc.ID] && inc.AlertName == nodata.AlertName && inc.Status == "firing" {
					nd = inc
					return true
				}
			}
			return false
		})
		s.dockerDo(ctx, lab.Gateway, "unpause")
		unpaused := time.Now()
		done := poll(t, s, nodata.AlertName+" resolved", func() bool {
			inc, err := probe.Incident(nd.ID)
			return err == nil && inc.Status == "resolved"
		})
		r := faultRow{fault: "the gateway's scrape down (paused)", page: paged.Sub(paused), resolve: done.Sub(unpaused), incidents: 1,
			note: nodata.AlertName + " paged: " + nd.Annotations["summary"]}
		tl.mark("FAULT " + r.String())
		rows = append(rows, r)
	})

	beside()
	// The pager kill -9'd under a burst of notifications: every one it
	// acknowledged with a 2xx must be there after its restart.
	t.Run("pager-kill-under-burst", func(t *testing.T) {
		acked, sent, id, pid := s.burstAndKill(t, ctx)
		if pid == 0 {
			t.Fatalf("the burst of %d ended before the pager was killed", sent)
		}
		s.waitRestarted(t, ctx, id, pid, time.Minute)
		s.waitHealthy(ctx, healthyWithin)
		lost := 0
		for _, id := range acked {
			if inc, err := probe.Incident(id); err != nil || inc.ID != id {
				lost++
			}
		}
		r := faultRow{fault: "the pager kill -9'd under a burst", lost: lost,
			note: fmt.Sprintf("%d notifications sent, %d acknowledged before the kill, %d of those stored after the restart", sent, len(acked), len(acked)-lost)}
		tl.mark("FAULT " + r.String())
		if lost > 0 {
			t.Errorf("%d acknowledged notifications were lost by the pager's kill -9", lost)
		}
		if len(acked) == 0 || len(acked) == sent {
			t.Errorf("the kill did not land mid-burst: %d of %d acknowledged", len(acked), sent)
		}
		rows = append(rows, r)
	})
	return rows
}
