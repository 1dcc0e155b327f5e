package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"burnlab/shared/freeport"
	"burnlab/shared/proc"
)

// pagerProc is the real pager binary, which the test kills with SIGKILL
// and starts again on the same address and data directory.
type pagerProc struct {
	t    *testing.T
	bin  string
	addr string
	data string
	mu   sync.Mutex
	proc *proc.Proc
	logs []string // the log of each run
}

func buildPager(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pager")
	if err := (proc.Build{Dir: ".", Out: bin, Pkgs: []string{"."}}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	return bin
}

func startPager(t *testing.T, bin, addr, data string) *pagerProc {
	p := &pagerProc{t: t, bin: bin, addr: addr, data: data}
	t.Cleanup(p.kill)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs the pager and waits until it is ready. It does not fail the
// test itself, so a goroutine other than the test's may call it.
func (p *pagerProc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	log := filepath.Join(p.t.TempDir(), fmt.Sprintf("pager-%d.log", len(p.logs)))
	pp, err := proc.Start(context.Background(), proc.Spec{Name: "pager", Log: log, Ready: "http://" + p.addr + "/readyz", ReadyTimeout: 10 * time.Second,
		Args: []string{p.bin, "-listen", p.addr, "-data", p.data, "-profile-url", "", "-prometheus-url", "", "-log-level", "warn"}})
	if err != nil {
		return err
	}
	p.proc, p.logs = pp, append(p.logs, log)
	return nil
}

// kill is kill -9: no drain, no deferred Close, only what was fsynced.
func (p *pagerProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		p.proc.Kill()
		p.proc = nil
	}
}

func tear(t *testing.T, data string) {
	f, err := os.OpenFile(filepath.Join(data, "notifications.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(`{"type":"notification","at":"2026-12-01T03:12:00Z","receiver":"pager-pa`); err != nil {
		t.Error(err)
	}
}

// Under fire: 1,000 notifications from 20 senders while the pager is killed
// with SIGKILL and restarted twice, once with a torn last line. The senders
// retry as Alertmanager does; every notification that got a 2xx must be in
// /api/incidents afterwards, and the journal must read back whole.
func TestUnderFireWithKill9Restarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	const (
		notifications = 1000
		senders       = 20
		kills         = 2
	)
	data := t.TempDir()
	p := startPager(t, buildPager(t), freeport.ForTest(t), data)
	deadline := time.Now().Add(30 * time.Second) // the build is not counted: a cold cache is slow
	base := "http://" + p.addr

	fingerprint := func(i int) string { return fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15) }
	const startsAt = "2026-12-01T03:12:00Z"
	startUnix := time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC).Unix()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	defer client.CloseIdleConnections()
	var acked [notifications]atomic.Bool
	var nAcked, retried, refused atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := range work {
				severity, path := "page", "/webhook/page"
				if i%4 == 0 {
					severity, path = "ticket", "/webhook/ticket"
				}
				body := fmt.Sprintf(`{"version":"4","receiver":"pager-%s","status":"firing","alerts":[{"status":"firing","fingerprint":%q,`+
					`"startsAt":%q,"labels":{"alertname":"Burn%d","severity":%q,"sloth_slo":"stream-latency"},"annotations":{"burn_rate":"14.4x"}}]}`,
					severity, fingerprint(i), startsAt, i, severity)
				for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
					if time.Now().After(deadline) {
						break // and take the rest off the queue, unsent
					}
					resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
					if err != nil { // killed: refused, reset or cut; Alertmanager retries
						retried.Add(1)
						time.Sleep(backoff)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode/100 == 2 {
						acked[i].Store(true)
						nAcked.Add(1)
						break
					}
					if resp.StatusCode/100 == 5 {
						retried.Add(1)
						time.Sleep(backoff)
						continue
					}
					refused.Add(1) // a 4xx: Alertmanager gives up on it
					t.Errorf("notification %d refused: %s", i, resp.Status)
					break
				}
			}
		})
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for k := 1; k <= kills; k++ {
			for nAcked.Load() < int64(k*notifications/(kills+1)) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			p.kill()
			if k == 1 {
				// Leave what a power cut leaves, a line without its end,
				// for the restart to deal with.
				tear(t, data)
			}
			time.Sleep(50 * time.Millisecond) // senders meet a closed port for a while
			if err := p.start(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range notifications {
		work <- i
	}
	close(work)
	wg.Wait()
	<-killed
	t.Logf("acknowledged %d of %d, retried %d, refused %d, pager killed with SIGKILL %d times", nAcked.Load(), notifications, retried.Load(), refused.Load(), kills)
	if time.Now().After(deadline) {
		t.Fatalf("not done in 30s: %d acknowledged", nAcked.Load())
	}

	// Once more, so the journal the last run appended to is read back too.
	p.kill()
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	incs := allIncidents(t, client, base)
	have := map[string]bool{}
	for _, inc := range incs {
		have[inc.ID] = true
	}
	lost := 0
	for i := range notifications {
		if acked[i].Load() && !have[fmt.Sprintf("%s-%d", fingerprint(i), startUnix)] {
			lost++
			if lost <= 5 {
				t.Errorf("notification %d (%s) was acknowledged and is not in /api/incidents", i, fingerprint(i))
			}
		}
	}
	if lost > 0 || len(incs) != notifications {
		t.Errorf("%d acknowledged notifications lost; %d incidents, want %d", lost, len(incs), notifications)
	}

	// The journal: every line whole (a torn one was cut on restart, and
	// the runs' logs say so), each notification once.
	f, err := os.Open(filepath.Join(data, "notifications.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines, bad := 0, 0
	for sc.Scan() {
		lines++
		var r struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Type != "notification" {
			bad++
			t.Errorf("journal line %d unreadable: %.80s", lines, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != notifications {
		t.Errorf("journal has %d lines, want %d", lines, notifications)
	}
	// The restart after the tear must cut it. The others may cut a line
	// too: Linux checks for a fatal signal between the pages of a write(2)
	// to a file (generic_perform_write), so SIGKILL can stop an append
	// that crosses a page boundary short, before its fsync and its answer.
	cuts := make([]int, 0, kills+1)
	p.mu.Lock()
	for _, name := range p.logs {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		cuts = append(cuts, strings.Count(string(b), "torn_bytes_cut"))
	}
	p.mu.Unlock()
	t.Logf("journal: %d lines, %d unreadable; torn last lines cut per run: %v", lines, bad, cuts)
	if len(cuts) < 2 || cuts[1] != 1 {
		t.Errorf("torn lines cut per run %v: the run after the tear (the second) must cut it once", cuts)
	}
	if bad > 0 {
		t.Errorf("%d unreadable journal lines", bad)
	}
}

// nextLink is the Link header's rel="next", or "".
var nextLink = regexp.MustCompile(`<([^>]*)>; rel="next"`)

// allIncidents reads every page of /api/incidents, following the Link
// header's next.
func allIncidents(t *testing.T, client *http.Client, base string) []struct{ ID string } {
	t.Helper()
	var all []struct{ ID string }
	for path := "/api/incidents"; path != ""; {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var page []struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
		}
		all = append(all, page...)
		path = ""
		if m := nextLink.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
			path = m[1]
		}
	}
	return all
}
