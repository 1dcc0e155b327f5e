package targets

import (
	"strings"
	"testing"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

const goodConfig = `rules:
  - name: provider
    match: {sloth_service: llm-provider}
    jobs: [provider]
    port: 6061
  - name: gateway
    match:
      sloth_service: llm-gateway
    jobs: [gateway]
    port_label: __meta_kubernetes_pod_annotation_profiles_grafana_com_memory_port
    sampled: true
  - name: everything-else
    static: [http://gateway:6060/debug/pprof/allocs]
`

func TestAConfigMapsAlertsToRulesInOrder(t *testing.T) {
	c, err := Parse([]byte(goodConfig), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	for labels, want := range map[*map[string]string]string{
		{"sloth_service": "llm-provider", "severity": "page"}: "provider",
		{"sloth_service": "llm-gateway"}:                      "gateway",
		{"alertname": "Watchdog"}:                             "everything-else",
	} {
		r, err := c.Match(*labels)
		if err != nil || r.Name != want {
			t.Errorf("%v: rule %v (%v), want %s", *labels, r, err, want)
		}
	}
	g := c.Rules[1]
	if g.Path != DefaultPath || g.MaxTargets != DefaultMaxTargets || g.GCJob != "gateway" || !g.Sampled || g.line != 6 {
		t.Errorf("the gateway rule's defaults: %+v", g)
	}
	if !c.NeedsPrometheus() {
		t.Error("rules with jobs need Prometheus")
	}
}

// Every mistake is an error naming the file, the line and the field: the
// field's own line where it is written, the rule's where it is not.
func TestABadConfigSaysWhereAndWhat(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "rules:\n  - name: a\n    jobs: [x]\n    prot: 6060\n", "pager.yml:4: prot: not a field of a rule; want one of name, match, jobs, static, port, "},
		{"unknown top field", "rule:\n  - name: a\n", "pager.yml:1: rule: not a field of the file; want one of rules"},
		{"empty rule", "rules:\n  - ~\n  - name: a\n    jobs: [x]\n    port: 70000\n", "pager.yml:2: rule 1: empty"},
		{"after an empty rule", "rules:\n  -\n  - name: a\n    jobs: [x]\n    port: 70000\n", "pager.yml:5: rule 2 (\"a\"): port: 70000"},
		{"empty field name", "rules:\n  - name: a\n    jobs: [x]\n    \"\": 1\n", "pager.yml:4: : not a field of a rule"},
		{"wrong type", "rules:\n  - name: a\n    jobs: [x]\n\n    port: http\n", "pager.yml:5: cannot unmarshal !!str `http` into int"},
		{"no process", "rules:\n  - name: a\n    match: {job: x}\n", "pager.yml:2: rule 1 (\"a\"): jobs: neither jobs nor static"},
		{"unreachable", "rules:\n  - name: all\n    jobs: [x]\n  - name: b\n    match: {a: b}\n    jobs: [y]\n",
			"pager.yml:2: rule 1 (\"all\"): match: empty, so it takes every alert and the 1 rules after it can never match"},
		{"both", "rules:\n  - name: a\n    jobs: [x]\n    static: [http://h:1/]\n", "static: and jobs both"},
		{"bad URL", "rules:\n  - name: a\n    static: [gateway:6060]\n", `static: "gateway:6060": want an http:// or https:// URL`},
		{"bad port", "rules:\n  - name: a\n    jobs: [x]\n    port: 70000\n", "pager.yml:4: rule 1 (\"a\"): port: 70000 is no TCP port"},
		{"bad label", "rules:\n  - name: a\n    match: {a-b: c}\n    jobs: [x]\n", `match: "a-b" is not a label name`},
		{"same name", "rules:\n  - {name: a, match: {a: b}, jobs: [x]}\n  - {name: a, jobs: [y]}\n", "pager.yml:3: rule 2 (\"a\"): name: the name of rule 1 too"},
		{"no rules", "rules: []\n", "no rules"},
		{"empty", "", "empty: want a `rules:` list"},
		{"two documents", "rules: []\n---\nrules: []\n", "more than one YAML document"},
		{"not YAML", "rules: [\n", "pager.yml: yaml: line"},
		{"too many", "rules:\n  - name: a\n    jobs: [x]\n    max_targets: 5000\n", "max_targets: 5000: want 1 to 1000"},
		{"port on static", "rules:\n  - name: a\n    static: [http://h:1/]\n    port: 2\n", "a static URL has its own"},
		{"path", "rules:\n  - name: a\n    jobs: [x]\n    path: debug/pprof/allocs\n", `path: "debug/pprof/allocs": want an absolute path`},
		{"unknown kind", "rules:\n  - name: a\n    jobs: [x]\n    profiles: [cpu, trace]\n", `profiles: "trace": want some of block, cpu, goroutine, mutex (the heap is always taken)`},
		{"heap as a kind", "rules:\n  - name: a\n    jobs: [x]\n    profiles: [heap]\n", `profiles: "heap": want some of`},
		{"kind twice", "rules:\n  - name: a\n    jobs: [x]\n    profiles: [cpu, cpu]\n", `profiles: "cpu" twice`},
		{"cpu seconds", "rules:\n  - name: a\n    jobs: [x]\n    cpu_seconds: 600\n", "pager.yml:4: rule 1 (\"a\"): cpu_seconds: 600: want 1 to 60"},
	} {
		_, err := Parse([]byte(tc.yaml), "pager.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load("no/such/pager.yml"); err == nil || !strings.Contains(err.Error(), "no/such/pager.yml") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestAnAlertNoRuleTakesIsProfiledNowhere(t *testing.T) {
	c, err := Parse([]byte("rules:\n  - {name: gateway, match: {sloth_service: llm-gateway}, jobs: [gateway]}\n"), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Match(map[string]string{"sloth_service": "llm-provider", "alertname": "ProviderLatency"})
	if err == nil || !strings.Contains(err.Error(), `no rule of pager.yml takes this alert (alertname="ProviderLatency", sloth_service="llm-provider")`) {
		t.Errorf("an alert no rule takes: %v", err)
	}
	if d := Default("", "", ""); len(d.Rules) != 0 {
		t.Errorf("no -profile-url makes rules: %+v", d)
	}
	d := Default("http://g:6060/debug/pprof/allocs", "http://g:6060/t", "gateway")
	if r, err := d.Match(map[string]string{"anything": "x"}); err != nil || r.Static[0] != "http://g:6060/debug/pprof/allocs" || !r.Sampled || r.GCJob != "gateway" {
		t.Errorf("the flags' rule takes every alert as the pager always did: %+v %v", r, err)
	}
}

// Each kind is at the heap profile's path with its own last element; a
// cpu profile samples the rule's seconds.
func TestEachKindIsBesideTheHeapProfile(t *testing.T) {
	for heap, want := range map[string]map[string]string{
		"http://10.0.0.1:6060/debug/pprof/allocs": {"heap": "http://10.0.0.1:6060/debug/pprof/allocs",
			"cpu": "http://10.0.0.1:6060/debug/pprof/profile?seconds=7", "goroutine": "http://10.0.0.1:6060/debug/pprof/goroutine",
			"mutex": "http://10.0.0.1:6060/debug/pprof/mutex", "block": "http://10.0.0.1:6060/debug/pprof/block"},
		"https://svc:8443/admin/debug/pprof/heap?gc=1": {"heap": "https://svc:8443/admin/debug/pprof/heap?gc=1",
			"cpu": "https://svc:8443/admin/debug/pprof/profile?seconds=7", "goroutine": "https://svc:8443/admin/debug/pprof/goroutine"},
	} {
		for k, u := range want {
			if got := (Target{URL: heap}).URLFor(Kinds[k], 7); got != u {
				t.Errorf("%s of %s: %s, want %s", k, heap, got, u)
			}
		}
	}
}

// A port label's value is read as a number: "+80" and "0080" are port 80,
// not a host of "+80".
func TestAPortLabelIsANumber(t *testing.T) {
	r := &Rule{Name: "r", PortLabel: "p", Path: DefaultPath}
	for v, want := range map[string]string{"0080": "http://10.0.0.1:80/debug/pprof/allocs", "+6060": "http://10.0.0.1:6060/debug/pprof/allocs"} {
		tg, err := r.target(v1.ActiveTarget{ScrapeURL: "http://10.0.0.1:9100/metrics", Labels: model.LabelSet{"p": model.LabelValue(v), "instance": "i"}})
		if err != nil || tg.URL != want {
			t.Errorf("port label %q: %+v %v, want %s", v, tg, err, want)
		}
	}
	if _, err := r.target(v1.ActiveTarget{ScrapeURL: "http://10.0.0.1:9100/metrics", Labels: model.LabelSet{"p": "http"}}); err == nil || !strings.Contains(err.Error(), "no TCP port") {
		t.Errorf("a port label of a name: %v", err)
	}
}
