package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// helmValues is the part of kube-prometheus-stack's values burnlab sets.
type helmValues struct {
	Alertmanager struct {
		AlertmanagerSpec struct{ Replicas *int } `json:"alertmanagerSpec"`
	}
	Grafana struct {
		Image struct{ Repository, Tag string }
		Ini   struct {
			Paths   struct{ Plugins string }
			Plugins struct {
				AllowUnsigned string `json:"allow_loading_unsigned_plugins"`
			}
		} `json:"grafana.ini"`
		Sidecar struct {
			Datasources struct{ UID string }
			Dashboards  struct {
				Enabled    bool
				Label      string
				LabelValue string `json:"labelValue"`
			}
		}
		AdditionalDataSources []struct{ Name, UID, Type, URL string } `json:"additionalDataSources"`
	}
}

// The Helm values name what the repo names: the Prometheus datasource uid
// of every dashboard panel, the pager datasource compose provisions with
// the pager's Service for its URL, the plugin's id and the directory the
// image installs it in, the dashboard ConfigMap's label, and burnlab's
// Grafana image; and Alertmanager runs as many replicas as compose's HA
// pair. The chart itself is not here to check them against.
func TestHelmValuesNameWhatTheRepoNames(t *testing.T) {
	faults := helmFaults(t, filepath.Join(deploy, "kube-prometheus-stack-values.yaml"))
	for _, f := range faults {
		t.Error(f)
	}
	// And the check can fail.
	b, err := os.ReadFile(filepath.Join(deploy, "kube-prometheus-stack-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "values.yaml")
	os.WriteFile(bad, []byte(strings.Replace(string(b), "uid: burnlab-prometheus", "uid: prometheus", 1)), 0o644)
	if fs := helmFaults(t, bad); len(fs) != 1 || !strings.Contains(fs[0], "burnlab-prometheus") {
		t.Errorf("the chart's default datasource uid went unnoticed: %q", fs)
	}
}

func helmFaults(t *testing.T, path string) []string {
	var v helmValues
	decode(t, path, &v)
	var out []string
	g := v.Grafana

	var ds struct {
		Datasources []struct{ Name, UID, Type, URL string }
	}
	decode(t, filepath.Join(root, "grafana/provisioning/datasources/prometheus.yml"), &ds)
	dash, err := os.ReadFile(filepath.Join(root, Dashboard))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Datasources {
		switch d.Type {
		case "prometheus":
			if g.Sidecar.Datasources.UID != d.UID || !strings.Contains(string(dash), `"uid": "`+d.UID+`"`) {
				out = append(out, fmt.Sprintf("grafana.sidecar.datasources.uid %q; the dashboard's panels name %q", g.Sidecar.Datasources.UID, d.UID))
			}
		default:
			found := false
			for _, a := range g.AdditionalDataSources {
				if a.UID == d.UID && a.Type == d.Type && a.Name == d.Name {
					found = true
					if a.URL != "http://pager.burnlab.svc:5001" {
						out = append(out, fmt.Sprintf("datasource %s: %s, not the pager's Service", a.Name, a.URL))
					}
				}
			}
			if !found {
				out = append(out, fmt.Sprintf("no additionalDataSources entry for %s (%s, uid %s) as compose provisions it", d.Name, d.Type, d.UID))
			}
		}
	}
	var plugin struct{ ID string }
	b, err := os.ReadFile(filepath.Join(root, "grafana/plugin/dist/plugin.json"))
	if err != nil || json.Unmarshal(b, &plugin) != nil {
		t.Fatalf("plugin.json: %v", err)
	}
	if g.Ini.Plugins.AllowUnsigned != plugin.ID {
		out = append(out, fmt.Sprintf("allow_loading_unsigned_plugins %q; the plugin is %q", g.Ini.Plugins.AllowUnsigned, plugin.ID))
	}
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^ENV GF_PATHS_PLUGINS=(\S+)$`).FindSubmatch(df); m == nil || string(m[1]) != g.Ini.Paths.Plugins {
		out = append(out, fmt.Sprintf("grafana.ini paths.plugins %q; the image installs the plugin in %q", g.Ini.Paths.Plugins, m))
	}
	// The HA pair: as many Alertmanager replicas as compose runs, gossiping
	// (the operator meshes its replicas itself).
	var compose struct {
		Services map[string]struct{ Image string }
	}
	decode(t, filepath.Join(root, "docker-compose.yml"), &compose)
	ams := 0
	for _, svc := range compose.Services {
		if strings.HasPrefix(svc.Image, "prom/alertmanager:") {
			ams++
		}
	}
	if r := v.Alertmanager.AlertmanagerSpec.Replicas; ams < 2 || r == nil || *r != ams {
		got := "unset"
		if r != nil {
			got = strconv.Itoa(*r)
		}
		out = append(out, fmt.Sprintf("alertmanager.alertmanagerSpec.replicas %s; compose runs an HA pair of %d", got, ams))
	}
	if g.Image.Repository != "burnlab/grafana" {
		out = append(out, fmt.Sprintf("Grafana image %s: only burnlab/grafana holds the plugin", g.Image.Repository))
	}
	if !g.Sidecar.Dashboards.Enabled || g.Sidecar.Dashboards.Label != "grafana_dashboard" || g.Sidecar.Dashboards.LabelValue != "1" {
		out = append(out, fmt.Sprintf("the dashboard sidecar looks for %+v; the ConfigMap is labelled grafana_dashboard: \"1\"", g.Sidecar.Dashboards))
	}
	return out
}

func decode(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
