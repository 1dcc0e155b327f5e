//go:build e2e

package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"burnlab/shared/freeport"
	"burnlab/shared/incident"
	"burnlab/shared/proc"
	"burnlab/shared/variant"
)

// A service of two replicas, found as a user's Prometheus finds them: two
// fixed gateways scraped by the real Prometheus as one job, and the pager
// given a config (docs/pager.md) whose rule maps the gateway's alerts to
// that job. A page of the gateway's is profiled on both replicas, through
// Prometheus's /api/v1/targets, and merged on one page: each replica's
// own total, the merge their sum, the stored file the merge. An alert
// whose rule names a job Prometheus does not scrape is profiled nowhere,
// and its page says why. Nothing here is a stand-in.
func TestEveryReplicaOfAServiceIsProfiled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin") + "/"
	for _, b := range []proc.Build{
		{Dir: root, Out: bin + "gateway", Pkgs: []string{gatewayPkg}, Tags: variant.Fixed.Tags()},
		{Dir: root, Out: bin, Pkgs: []string{"./loadgen/cmd/upstream", "./pager/cmd/pager"}},
	} {
		if err := b.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	promBin, _, err := findPrometheus(root)
	if err != nil {
		t.Fatal(err)
	}
	p := freeport.ForTest
	up, upAdmin, prom, pager := p(t), p(t), p(t), p(t)
	gw := [][2]string{{p(t), p(t)}, {p(t), p(t)}} // each replica's public and admin
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	promCfg := write("prometheus.yml", fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: gateway
    static_configs: [{targets: [%q, %q]}]
`, gw[0][1], gw[1][1]))
	targets := write("pager.yml", `rules:
  - name: gateway
    match: {sloth_service: llm-gateway}
    jobs: [gateway]
  - name: provider
    match: {sloth_service: llm-provider}
    jobs: [provider]
`)
	var procs []*proc.Proc
	t.Cleanup(func() {
		for _, pr := range procs {
			pr.Stop(5 * time.Second)
		}
	})
	start := func(name string, ready string, args ...string) {
		pr, err := proc.Start(ctx, proc.Spec{Name: name, Args: args, Log: filepath.Join(dir, name+".log"), Ready: ready})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, pr)
	}
	start("upstream", "http://"+upAdmin+"/readyz", bin+"upstream", "-listen", up, "-admin", upAdmin)
	for i, g := range gw {
		start(fmt.Sprintf("gateway-%d", i), "http://"+g[1]+"/readyz", bin+"gateway", "-listen", g[0], "-admin", g[1],
			"-upstream", "http://"+up, "-tenants", "k=t:100000000", "-drain-grace", "0s", "-log-level", "warn")
	}
	start("prometheus", "http://"+prom+"/-/ready", promBin, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address="+prom)
	start("pager", "http://"+pager+"/readyz", bin+"pager", "-listen", pager, "-data", filepath.Join(dir, "pager-data"),
		"-targets", targets, "-prometheus-url", "http://"+prom, "-profile-url", "", "-trace-url", "", "-alertmanager-urls", "",
		"-external-url", "http://"+pager)

	// Different work on each replica, so their profiles differ: 6 streams
	// through one, 2 through the other.
	for i, n := range []int{6, 2} {
		for range n {
			stream(t, ctx, "http://"+gw[i][0])
		}
	}
	probe := Probe{Addrs{Pager: pager, Prometheus: prom}}
	if err := waitFor(ctx, time.Minute, "Prometheus listing both replicas", func() (bool, error) {
		var r struct {
			Data struct {
				ActiveTargets []json.RawMessage `json:"activeTargets"`
			} `json:"data"`
		}
		err := getJSON("http://"+prom+"/api/v1/targets?state=active", &r)
		return err == nil && len(r.Data.ActiveTargets) == len(gw), err
	}); err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC().Truncate(time.Second)
	alerts := []map[string]any{
		{"status": "firing", "startsAt": now, "fingerprint": "00000000000000a1",
			"labels": map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_service": "llm-gateway"}},
		{"status": "firing", "startsAt": now, "fingerprint": "00000000000000a2",
			"labels": map[string]string{"alertname": "ProviderBudgetBurn", "severity": "page", "sloth_service": "llm-provider"}},
	}
	body, _ := json.Marshal(map[string]any{"version": "4", "status": "firing", "receiver": "pager-page", "groupKey": "{}", "alerts": alerts})
	resp, err := http.Post("http://"+pager+"/webhook/page", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the pager answered the page %s", resp.Status)
	}

	page := profileOf(t, ctx, probe, "00000000000000a1", now)
	if page.Error != "" || page.Rule != "gateway" || len(page.Instances) != 2 {
		t.Fatalf("the gateway's page: %+v", page)
	}
	var sum int64
	seen := map[string]bool{}
	for _, in := range page.Instances {
		if in.Error != "" || in.Instance != gw[0][1] && in.Instance != gw[1][1] || in.Total == 0 || len(in.Top) == 0 {
			t.Errorf("replica %+v, want one of %s and %s with its profile", in, gw[0][1], gw[1][1])
		}
		seen[in.Instance] = true
		sum += in.Total
	}
	if len(seen) != 2 {
		t.Errorf("the page's replicas %+v, want both", page.Instances)
	}
	if page.Instances[0].Total == page.Instances[1].Total || page.Total != sum {
		t.Errorf("the merge holds %d bytes, want the replicas' %d + %d, which differ", page.Total, page.Instances[0].Total, page.Instances[1].Total)
	}
	raw := get(t, ctx, "http://"+pager+"/api/incidents/"+incidentID("00000000000000a1", now)+"/profile")
	if merged, err := profile.ParseData(raw); err != nil || len(merged.Sample) == 0 {
		t.Errorf("the stored merge: %v", err)
	}
	if other := profileOf(t, ctx, probe, "00000000000000a2", now); !strings.Contains(other.Error, `Prometheus has no active target of job "provider"`) {
		t.Errorf("a page whose job Prometheus does not scrape: %+v", other)
	}
}

// stream sends one request through a gateway and reads its answer whole.
func stream(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/stream", strings.NewReader(`{"stream":true,"max_tokens":2000}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("[DONE]")) {
		t.Fatalf("a stream through %s: %s, %d bytes", base, resp.Status, len(b))
	}
}

// incidentID is the pager's ID of an alert's incident (its store's
// IncidentID).
func incidentID(fingerprint string, start time.Time) string {
	return fmt.Sprintf("%s-%d", fingerprint, start.Unix())
}

// profileOf waits for the page-time profile of an incident.
func profileOf(t *testing.T, ctx context.Context, probe Probe, fingerprint string, start time.Time) incident.Profile {
	t.Helper()
	var inc incident.Incident
	err := waitFor(ctx, time.Minute, "a profile on incident "+incidentID(fingerprint, start), func() (bool, error) {
		var err error
		inc, err = probe.Incident(incidentID(fingerprint, start))
		return err == nil && inc.Profile != nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return *inc.Profile
}

func get(t *testing.T, ctx context.Context, url string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}
