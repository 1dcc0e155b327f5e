package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"burnlab/shared/scenario"
)

const committed = "../../dashboards/llm-gateway-slo.json"

func TestCommittedJSONIsTheGeneratedOne(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("grafana/dashboards/llm-gateway-slo.json differs from the Go source: run make dashboards")
	}
}

// Exprs returns every PromQL expression in a dashboard JSON, with Grafana's
// $__rate_interval set to the lab's 1m.
func exprs(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title       string               `json:"title"`
			Description string               `json:"description"`
			Datasource  struct{ UID string } `json:"datasource"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		if p.Title == "" || len(p.Targets) == 0 {
			continue // a row
		}
		if p.Description == "" {
			t.Errorf("panel %q has no description telling the user what to look for", p.Title)
		}
		switch p.Datasource.UID {
		case PagerUID:
			continue // the plugin's queries are not PromQL
		case PrometheusUID:
		default:
			t.Errorf("panel %q uses datasource %q", p.Title, p.Datasource.UID)
		}
		for i, q := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i+1)] = strings.ReplaceAll(q.Expr, "$__rate_interval", "1m")
		}
	}
	for i, a := range d.Annotations.List {
		if a.Expr != "" {
			out[fmt.Sprintf("annotation #%d", i+1)] = a.Expr
		}
	}
	return out
}

// Every query parses with Prometheus's own parser: promtool checks each one
// as a recording rule. (The lab e2e runs them against a live Prometheus.)
func TestEveryQueryParses(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (make tools installs it; make test runs this)")
	}
	b, _ := os.ReadFile(committed)
	qs := exprs(t, b)
	if len(qs) < 15 {
		t.Fatalf("only %d queries found", len(qs))
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	i := 0
	for _, q := range qs {
		i++
		j, _ := json.Marshal(q)
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, j)
	}
	path := filepath.Join(t.TempDir(), "queries.yml")
	os.WriteFile(path, []byte(rules.String()), 0o644)
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool rejects a dashboard query: %v\n%s", err, out)
	}
}

func TestProvisioningMatchesTheDashboard(t *testing.T) {
	ds, err := os.ReadFile("../../provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"uid: " + PrometheusUID, "uid: " + PagerUID, "type: " + PagerPluginID} {
		if !strings.Contains(string(ds), want) {
			t.Errorf("datasource provisioning lacks %q", want)
		}
	}
	plugin, err := os.ReadFile("../../plugin/dist/plugin.json")
	if err != nil || !strings.Contains(string(plugin), `"id": "`+PagerPluginID+`"`) {
		t.Errorf("plugin.json does not declare %s: %v", PagerPluginID, err)
	}
	prov, err := os.ReadFile("../../provisioning/dashboards/burnlab.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prov), "path: /var/lib/grafana/dashboards") {
		t.Error("the dashboard provider does not read /var/lib/grafana/dashboards")
	}
	b, _ := os.ReadFile(committed)
	var d struct {
		UID, Title string
		Panels     []struct{ Type, Title string }
	}
	json.Unmarshal(b, &d)
	if d.UID != UID || d.Title != Title {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	types := map[string]bool{}
	for _, p := range d.Panels {
		types[p.Type] = true
	}
	if !types["flamegraph"] || !types["table"] {
		t.Errorf("the flame graph and incidents panels are missing: %v", types)
	}
}

// The lab lets anyone view; the admin password never has a default in the
// repo.
func TestGrafanaIniTakesThePasswordFromTheEnvironment(t *testing.T) {
	b, err := os.ReadFile("../../grafana.ini")
	if err != nil {
		t.Fatal(err)
	}
	ini := string(b)
	for _, want := range []string{"admin_password = $__env{GF_SECURITY_ADMIN_PASSWORD}", "[auth.anonymous]\nenabled = true\norg_role = Viewer",
		"allow_loading_unsigned_plugins = " + PagerPluginID} {
		if !strings.Contains(ini, want) {
			t.Errorf("grafana.ini lacks %q", want)
		}
	}
	for _, line := range strings.Split(ini, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.Contains(k, "password") && !strings.HasPrefix(strings.TrimSpace(v), "$__env{") {
			t.Errorf("a password in the repo: %q", line)
		}
	}
}

// The active scenario is on every time series (a dashboard annotation
// applies to all of them) and in a stat that shows its name.
func TestScenarioIsAnAnnotationAndAStat(t *testing.T) {
	d, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	var annotated bool
	for _, a := range d.Annotations.List {
		if a.Name == "Scenarios" && a.Expr != nil && strings.Contains(*a.Expr, scenario.Metric) && a.Filter == nil && a.Enable {
			annotated = true
		}
	}
	if !annotated {
		t.Error("no enabled Scenarios annotation on every panel reading " + scenario.Metric)
	}
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Type, Title string
			Options     struct{ TextMode string }
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc.Panels {
		if p.Title == "Scenario" {
			if p.Type != "stat" || p.Options.TextMode != "name" || len(p.Targets) != 1 || !strings.Contains(p.Targets[0].Expr, scenario.Metric) {
				t.Errorf("the Scenario panel must be a stat showing the name of %s: %+v", scenario.Metric, p)
			}
			return
		}
	}
	t.Error("no Scenario stat")
}

// The stream-duration panel shows the gateway's exemplars, each a slow
// stream's request ID and tenant, on one of its gateway queries: the
// others would fetch the same points again.
func TestStreamDurationPanelShowsExemplars(t *testing.T) {
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Title   string
			Targets []struct {
				Expr     string
				Exemplar bool
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc.Panels {
		if p.Title != "Stream duration: server and client" {
			continue
		}
		var with []string
		for _, q := range p.Targets {
			if q.Exemplar {
				with = append(with, q.Expr)
			}
		}
		if len(with) != 1 || !strings.Contains(with[0], "gateway_stream_duration_seconds_bucket") {
			t.Errorf("%s: exemplars on %q, want them on exactly one query of gateway_stream_duration_seconds", p.Title, with)
		}
		return
	}
	t.Error("no Stream duration panel")
}

// The "Error budget remaining" panel reads the budget as the pager and
// the alerts do, and its lab query is the one the promtool suite holds to
// data (a burn of seconds in a fresh Prometheus: 95 % left, not none).
func TestBudgetLeftIsTheSuitesQuery(t *testing.T) {
	b, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	suite, err := os.ReadFile("../../../prometheus/tests/slo-lab.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, q := range exprs(t, b) {
		if strings.Contains(q, "sum_over_time((slo:sli_error:ratio_rate") {
			left = append(left, q)
		}
	}
	if len(left) != 1 || strings.Count(left[0], " or (1 - ") != len(ruleSets)-1 {
		t.Fatalf("budget-left queries %q: want one, each rule set's figure joined with or, so it has data on any stack", left)
	}
	if !strings.Contains(string(suite), "round("+left[0]+", 0.001)") {
		t.Errorf("the promtool suite does not hold the budget-left query to data:\n%s", left[0])
	}
	if strings.Contains(string(b), "slo:period_error_budget_remaining:ratio") {
		t.Error("a panel reads Sloth's budget remaining, the mean burn over the history")
	}
}
