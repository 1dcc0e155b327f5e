package kubernetes

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

const deploy = root + "/deploy/kubernetes"

// faults builds an overlay of a deploy/kubernetes tree and runs every
// check on it; a build or decoding error is the fault "build".
func faults(t *testing.T, r *repo, tree string, ov Overlay) map[string][]string {
	t.Helper()
	inv, err := build(t, tree, ov)
	if err != nil {
		return map[string][]string{"build": {err.Error()}}
	}
	out := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		if fs := checks[name](inv, r, ov); len(fs) > 0 {
			out[name] = fs
		}
	}
	return out
}

func TestOverlaysPassEveryCheck(t *testing.T) {
	r := loadRepo(t)
	dirs, err := os.ReadDir(filepath.Join(deploy, "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, d.Name())
	}
	var known []string
	for _, ov := range Overlays {
		known = append(known, ov.Name)
	}
	if !slices.Equal(names, slices.Sorted(slices.Values(known))) {
		t.Fatalf("overlays on disk %v; the checks know %v", names, known)
	}
	for _, ov := range Overlays {
		t.Run(ov.Name, func(t *testing.T) {
			for check, fs := range faults(t, r, deploy, ov) {
				for _, f := range fs {
					t.Errorf("%s: %s", check, f)
				}
			}
		})
	}
}

// The generated files are what `make k8s` would write now: the rules and
// the dashboard are never hand-kept twins.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%v: run make k8s", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what make k8s writes from the repo: run make k8s", rel)
		}
	}
}

// kubectl's own kustomize (the one `kubectl apply -k` runs) builds the same
// objects as the Go API the checks use.
func TestKubectlBuildsTheSameObjects(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	for _, ov := range Overlays {
		out, err := exec.Command("kubectl", "kustomize", ov.Dir(deploy)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", ov.Name, err)
		}
		objs, err := Build(ov.Dir(deploy))
		if err != nil {
			t.Fatal(err)
		}
		var docs []string
		for _, doc := range strings.Split("\n"+string(out), "\n---\n") {
			if strings.TrimSpace(doc) != "" {
				docs = append(docs, doc)
			}
		}
		if len(docs) != len(objs) {
			t.Fatalf("%s: kubectl builds %d objects, krusty %d", ov.Name, len(docs), len(objs))
		}
		strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
		var theirs, ours []string
		for i, doc := range docs {
			o, _, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: kubectl's object %d: %v", ov.Name, i, err)
			}
			theirs, ours = append(theirs, asJSON(t, o)), append(ours, asJSON(t, objs[i]))
		}
		// The two order objects differently; the set is what is applied.
		slices.Sort(theirs)
		slices.Sort(ours)
		for i := range theirs {
			if theirs[i] != ours[i] {
				t.Errorf("%s: kubectl builds\n%.300s\nkrusty\n%.300s", ov.Name, theirs[i], ours[i])
			}
		}
	}
}

func asJSON(t *testing.T, o runtime.Object) string {
	b, err := json2(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every check can fail: each hand-made fault, made in a copy of
// deploy/kubernetes, is caught by the check meant for it, with a message
// that says what is wrong.
func TestChecksFailOnHandMadeFaults(t *testing.T) {
	r := loadRepo(t)
	for _, c := range []struct {
		name, file, old, new string
		overlay              string
		check, says          string
	}{
		{"misspelled field", "base/gateway.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "fixed",
			"build", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"misspelled operator field", "base/monitoring.yaml", "scrapeTimeout: 4s\n---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: upstream",
			"scrapeTimout: 4s\n---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: upstream", "fixed",
			"build", `unknown field "spec.endpoints[0].scrapeTimout"`},
		{"unknown kind", "base/namespace.yaml", "name: burnlab\n", "name: burnlab\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: x\n", "fixed",
			"build", "Gadget"},
		{"container port mismatch", "base/gateway.yaml", "containerPort: 6060", "containerPort: 6070", "baseline",
			"ports", "containerPorts [6070 8080], but it listens on [6060 8080]"},
		{"listen port off the table", "base/upstream.yaml", `value: ":8081"`, `value: ":8082"`, "baseline",
			"ports", "the lab's address table says [6062 8081]"},
		{"probe on the wrong path", "base/pager.yaml", "path: /readyz", "path: /ready", "fixed",
			"ports", "readiness probe GET /ready"},
		{"rule drift", "components/windows-lab/prometheusrule.yaml", `le="0.6"}[30s]`, `le="0.5"}[30s]`, "baseline",
			"rules", "differs from prometheus/rules/slo-lab.yml"},
		{"rule promtool rejects", "components/windows-production/prometheusrule.yaml", "- expr: |\n", "- expr: |\n        sum(\n", "production",
			"rules", "promtool check rules"},
		{"env the binary does not read", "base/gateway.yaml", "name: UPSTREAM_URL", "name: GATEWAY_UPSTREAM", "fixed",
			"env", "env GATEWAY_UPSTREAM is read by no flag of gateway"},
		{"URL to no Service", "base/gateway.yaml", "http://upstream:8081", "http://upstream-api:8081", "fixed",
			"env", "names no Service"},
		{"scrape job renamed", "base/monitoring.yaml", "replacement: alertmanager", "replacement: am", "fixed",
			"scrape-jobs", `job "am" is no job of prometheus.yml`},
		{"scrape the wrong port", "base/monitoring.yaml", "- port: admin", "- port: http", "fixed",
			"scrape-jobs", "job gateway scrapes"},
		{"root container", "base/upstream.yaml", "runAsUser: 65532", "runAsUser: 0", "fixed",
			"hardening", "not runAsNonRoot with a non-zero runAsUser"},
		{"no limits", "components/load/loadgen.yaml", "            limits:\n              cpu: \"1\"\n              memory: 512Mi\n", "", "baseline",
			"hardening", "no cpu request and limit"},
		{"admin port open to all", "base/networkpolicy.yaml", "    - ports:\n        - port: admin\n      from:", "    - ports:\n        - port: admin\n      from:\n        - namespaceSelector: {}", "fixed",
			"networkpolicy", "gateway port 6060 (admin) is reachable from"},
		{"allow policy selecting nothing", "base/networkpolicy.yaml", "  name: upstream\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: upstream", "  name: upstream\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: nothing", "fixed",
			"networkpolicy", "upstream port 8081 (http) is reachable from"},
		{"inhibition dropped", "base/alertmanagerconfig.yaml", "equal: [sloth_service, sloth_slo]", "equal: [sloth_slo]", "fixed",
			"alertmanager", "inhibit rule 0"},
		{"shards disagree", "components/load/loadgen.yaml", "parallelism: 2", "parallelism: 3", "baseline",
			"load", "all three must be N"},
		{"shape field misspelled", "components/load/shape.json", `"long_every"`, `"long_evrey"`, "baseline",
			"load", `unknown field "long_evrey"`},
		{"image tag", "overlays/fixed/kustomization.yaml", "newTag: fixed", "newTag: latest", "fixed",
			"images", `compose (GATEWAY_TAG=fixed) runs "burnlab/gateway:fixed"`},
		{"dashboard edited", "base/grafana/llm-gateway-slo.json", `"uid": "burnlab-llm-gateway-slo"`, `"uid": "mine"`, "fixed",
			"dashboard", "does not hold grafana/dashboards/llm-gateway-slo.json"},
		{"duration the operator refuses", "base/monitoring.yaml", "interval: 5s", "interval: 5 seconds", "fixed",
			"schema", `"5 seconds" is not a Prometheus duration`},
		{"matcher the operator refuses", "base/alertmanagerconfig.yaml", `matchType: "="`, `matchType: "=="`, "fixed",
			"schema", "invalid 'matchType'"},
		{"component outside the namespace", "overlays/baseline/kustomization.yaml", "namespace: burnlab\n", "", "baseline",
			"services", `Job/loadgen in namespace "", not "burnlab"`},
		{"pdb keeps every replica", "base/gateway.yaml", "minAvailable: 1", "minAvailable: 2", "fixed",
			"pdb", "minAvailable 2 of 2"},
		{"pager rule on no scrape job", "base/pager.yml", "jobs: [gateway]", "jobs: [gateways]", "fixed",
			"pager-targets", "job gateways is no scrape job"},
		{"replicas behind one URL", "base/pager.yml", "jobs: [gateway]", "static: [http://gateway:6060/debug/pprof/allocs]", "fixed",
			"pager-targets", "Deployment/gateway runs 2 replicas and no pager rule profiles its job"},
		{"pager config misspelled", "base/pager.yml", "sampled: true", "sampeld: true", "fixed",
			"pager-targets", "sampeld: not a field of a rule"},
		{"pager config not mounted", "base/pager.yaml", "              mountPath: /etc/burnlab", "              mountPath: /etc/pager", "fixed",
			"pager-targets", `PAGER_TARGETS "/etc/burnlab/pager.yml" is no file of a ConfigMap mounted read-only`},
		{"another Prometheus", "base/pager.yaml", "prometheus-operated.monitoring.svc", "prometheus.monitoring.svc", "fixed",
			"env", "want the operator's Service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree := copyTree(t, deploy)
			f := filepath.Join(tree, c.file)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(c.old)) {
				t.Fatalf("%s has no %q to break", c.file, c.old)
			}
			if err := os.WriteFile(f, bytes.Replace(b, []byte(c.old), []byte(c.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			var ov Overlay
			for _, o := range Overlays {
				if o.Name == c.overlay {
					ov = o
				}
			}
			got := faults(t, r, tree, ov)
			found := false
			for _, f := range got[c.check] {
				found = found || strings.Contains(f, c.says)
			}
			if !found {
				t.Fatalf("check %s did not say %q; faults: %q", c.check, c.says, got)
			}
			t.Logf("%s: %s", c.check, oneLine(got[c.check]))
		})
	}
}

func oneLine(fs []string) string {
	s := strings.Join(fs, "; ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// copyTree copies a deploy/kubernetes tree into a temporary directory.
func copyTree(t *testing.T, src string) string {
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// The Job's container, run here as the binary with the Job's own
// environment and arguments (the Secret's tenants, the ConfigMap's shape,
// the last completion index), sends its shard: the variables, their
// values and the shape are all the loadgen accepts. Only the target and
// the duration are changed, to a closed local port and a moment.
func TestTheLoadJobRunsAsItsManifestSays(t *testing.T) {
	loadRepo(t) // builds the binaries
	ov := Overlays[0]
	inv, err := build(t, deploy, ov)
	if err != nil {
		t.Fatal(err)
	}
	w, c := inv.workload("loadgen")
	if c == nil || w.job == nil {
		t.Fatal("no loadgen Job")
	}
	n := *w.job.Spec.Completions
	shapeDir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("JOB_COMPLETION_INDEX=%d", n-1)}
	for _, e := range c.Env {
		v, err := inv.envValue(w, e)
		if err != nil {
			t.Fatal(err)
		}
		switch e.Name {
		case "LOADGEN_TARGET":
			v = "http://127.0.0.1:9/v1/chat/stream" // discard: nothing listens
		case "LOADGEN_DURATION":
			v = "300ms"
		case "LOADGEN_ADMIN":
			v = "127.0.0.1:0"
		case "LOADGEN_SHAPE":
			data, err := inv.mountedFile(w, c, v)
			if err != nil {
				t.Fatal(err)
			}
			v = filepath.Join(shapeDir, filepath.Base(v))
			if err := os.WriteFile(v, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	cmd := exec.Command(filepath.Join(binDir, "loadgen"), append(append([]string{}, c.Command...), c.Args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loadgen with the Job's environment: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("shard      %d/%d", n-1, n); !strings.Contains(string(out), want) || !strings.Contains(string(out), "1 long (14000 events) per 100") {
		t.Fatalf("want %q and the ConfigMap's shape in the report:\n%s", want, out)
	}
}
