package lab

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lab runs the repo's own config files; rendering may change nothing
// but the compose addresses, and must leave none of them behind.
func TestRenderChangesOnlyAddresses(t *testing.T) {
	root, _ := filepath.Abs("../..")
	addrs, err := FreeAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, windows := range []string{"lab", "production"} {
		cfg := Config{Root: root, Dir: t.TempDir(), Addrs: addrs, Windows: windows}
		if err := cfg.defaults(); err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(cfg.Dir, "etc/rules"), 0o755)
		l := &Lab{cfg: cfg}
		if err := l.render(); err != nil {
			t.Fatal(err)
		}
		for src, dst := range map[string]string{
			"prometheus/prometheus.yml":                "etc/prometheus.yml",
			"alertmanager/alertmanager.yml":            "etc/alertmanager.yml",
			"prometheus/rules/slo-" + windows + ".yml": "etc/rules/slo.yml",
		} {
			orig, _ := os.ReadFile(filepath.Join(root, src))
			got, _ := os.ReadFile(filepath.Join(cfg.Dir, dst))
			for _, compose := range []string{"gateway:6060", "upstream:8081", "loadgen:6061", "pager:5001", "alertmanager:9093", "localhost:9090"} {
				if strings.Contains(string(got), compose) {
					t.Errorf("%s still names %s", dst, compose)
				}
			}
			back := strings.NewReplacer(addrs.GatewayAdmin, "gateway:6060", addrs.Upstream, "upstream:8081", addrs.LoadgenAdmin, "loadgen:6061",
				addrs.Pager, "pager:5001", addrs.Alertmanager, "alertmanager:9093", addrs.Prometheus, "localhost:9090").Replace(string(got))
			if back != string(orig) {
				t.Errorf("%s differs from %s by more than addresses", dst, src)
			}
		}
	}
}

func TestConfigRefusesUnknownSettings(t *testing.T) {
	for _, c := range []Config{{}, {Root: "/r", Dir: "/d", Variant: "nightly"}, {Root: "/r", Dir: "/d", Windows: "weekly"}} {
		if err := c.defaults(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// The e2e's "nothing new fires" checks passed when the pager or Prometheus
// was down, because they ignored read errors. Against a lab with nothing
// listening (and one that answers 500) every check must report the error.
func TestChecksFailWhenThePagerOrPrometheusCannotBeRead(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer broken.Close()
	dead, err := FreeAddrs()
	if err != nil {
		t.Fatal(err)
	}
	erring := dead
	erring.Pager = strings.TrimPrefix(broken.URL, "http://")
	erring.Prometheus = erring.Pager
	for name, addrs := range map[string]Addrs{"nothing listening": dead, "500": erring} {
		l := &Lab{cfg: Config{Addrs: addrs}}
		if _, err := newPage(l, "old"); err == nil {
			t.Errorf("%s: newPage found no new page instead of failing", name)
		}
		if _, err := find(l, "id"); err == nil {
			t.Errorf("%s: find returned no incident instead of failing", name)
		}
		if _, err := firing(l, "availability", "page"); err == nil {
			t.Errorf("%s: firing said silent instead of failing", name)
		}
		if err := pagerShows(l, "/"); err == nil {
			t.Errorf("%s: pagerShows passed instead of failing", name)
		}
	}
}
