package nodata

import (
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// sloth is a rule file of two SLOs as Sloth writes it, cut to what Find
// reads.
const sloth = `groups:
- name: sloth-slo-sli-recordings-svc-a
  rules:
  - record: slo:sli_error:ratio_rate5m
    expr: x
    labels: {sloth_id: svc-a, sloth_service: svc, sloth_slo: a, sloth_window: 5m, owner: me, tier: "1"}
  - record: slo:sli_error:ratio_rate30s
    expr: x
    labels: {sloth_id: svc-a, sloth_service: svc, sloth_slo: a, sloth_window: 30s, owner: me, tier: "1"}
- name: sloth-slo-alerts-svc-a
  rules:
  - alert: A
    expr: y
- name: sloth-slo-sli-recordings-svc-b
  rules:
  - record: slo:sli_error:ratio_rate1m
    expr: x
    labels: {sloth_id: svc-b, sloth_service: svc, sloth_slo: b, sloth_window: 1m, owner: me, tier: "2"}
`

func TestFindTakesEachSLOsShortestWindow(t *testing.T) {
	slis, err := Find([]byte(sloth))
	if err != nil {
		t.Fatal(err)
	}
	if len(slis) != 2 || slis[0].Record != "slo:sli_error:ratio_rate30s" || slis[0].Window != 30*time.Second ||
		slis[1].Record != "slo:sli_error:ratio_rate1m" || slis[1].SLO != "b" {
		t.Fatalf("%+v", slis)
	}
}

func TestAppendWritesOnePagePerService(t *testing.T) {
	out, err := Append([]byte(sloth))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), sloth) {
		t.Fatal("Sloth's text was not kept as it was")
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(out, &f); err != nil {
		t.Fatal(err)
	}
	g := f.Groups[len(f.Groups)-1]
	if g.Name != GroupPrefix+"svc" || len(g.Rules) != 1 {
		t.Fatalf("last group %+v", g)
	}
	r := g.Rules[0]
	// The longest of the shortest windows, so no SLO is called blind
	// before its own window could have emptied.
	if r.Alert != AlertName || r.For != "1m" {
		t.Errorf("alert %s for %s", r.Alert, r.For)
	}
	for _, want := range []string{`absent(slo:sli_error:ratio_rate30s{sloth_id="svc-a"})`, `or absent(slo:sli_error:ratio_rate1m{sloth_id="svc-b"})`, "count("} {
		if !strings.Contains(r.Expr, want) {
			t.Errorf("expr %q lacks %q", r.Expr, want)
		}
	}
	// Shared labels only: tier differs, sloth_slo names one SLO.
	if want := map[string]string{"owner": "me", "sloth_service": "svc", "severity": "page"}; !equal(r.Labels, want) {
		t.Errorf("labels %v, want %v", r.Labels, want)
	}
	if !strings.Contains(r.Annotations["summary"], "{{ $value }} of its 2 SLOs (a, b)") {
		t.Errorf("summary %q", r.Annotations["summary"])
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBadRuleFilesAreRefused(t *testing.T) {
	appended, err := Append([]byte(sloth))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ text, want string }{
		"twice":          {string(appended), "already has group"},
		"not YAML":       {"groups: [", "reading the rule file"},
		"no recordings":  {"groups:\n- name: g\n  rules:\n  - alert: A\n    expr: y\n", "no Sloth SLI recording"},
		"a bad window":   {"groups:\n- name: g\n  rules:\n  - record: slo:sli_error:ratio_rateX\n    expr: x\n", "ratio_rateX"},
		"no sloth label": {"groups:\n- name: g\n  rules:\n  - record: slo:sli_error:ratio_rate5m\n    expr: x\n", "sloth_service"},
	} {
		if _, err := Append([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// The committed rule files end with what Append writes (make check-rules
// compares the whole files with a regeneration).
func TestTheCommittedRulesHaveTheAlert(t *testing.T) {
	for _, w := range []string{"lab", "production"} {
		b, err := os.ReadFile("../../../prometheus/rules/slo-" + w + ".yml")
		if err != nil {
			t.Fatal(err)
		}
		sloth, _, ok := strings.Cut(string(b), "# Appended by prometheus/rulegen/cmd/nodata-rules")
		if !ok {
			t.Fatalf("slo-%s.yml has no no-data group", w)
		}
		out, err := Append([]byte(sloth))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(b) {
			t.Errorf("slo-%s.yml's no-data group is not Append's: run make rules", w)
		}
	}
}
