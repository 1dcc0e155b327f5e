package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lab runs the repo's own config files; rendering may change nothing
// but the compose addresses, and must leave none of them behind.
func TestRenderChangesOnlyAddresses(t *testing.T) {
	root, _ := filepath.Abs("../../..")
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
