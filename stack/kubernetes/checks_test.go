package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"burnlab/stack/lab"
)

// A check looks at one built overlay and says what is wrong with it, one
// fault a line; none when it holds.
type check func(inv *inventory, r *repo, ov Overlay) []string

// checks are every check, by name; TestOverlaysPassEveryCheck runs them on
// the committed tree and TestChecksFailOnHandMadeFaults on broken copies.
var checks = map[string]check{
	"services":      checkServices,
	"images":        checkImages,
	"hardening":     checkHardening,
	"ports":         checkPorts,
	"env":           checkEnv,
	"scrape-jobs":   checkScrapeJobs,
	"rules":         checkRules,
	"alertmanager":  checkAlertmanagerConfig,
	"dashboard":     checkDashboard,
	"networkpolicy": checkNetworkPolicy,
	"pager-targets": checkPagerTargets,
	"pdb":           checkPDB,
	"load":          checkLoadJob,
	"schema":        checkOperatorSchema,
}

// services: one workload per burnlab binary (the loadgen only with the
// load), each in the one namespace, the pager's data on its claim.
func checkServices(inv *inventory, _ *repo, ov Overlay) []string {
	var out []string
	if len(inv.namespaces) != 1 {
		return []string{fmt.Sprintf("%d namespaces, want one", len(inv.namespaces))}
	}
	ns := inv.namespaces[0].Name
	for _, o := range inv.objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return []string{err.Error()}
		}
		if _, isNS := o.(*corev1.Namespace); !isNS && m.GetNamespace() != ns {
			out = append(out, fmt.Sprintf("%T %s in namespace %q, not %q", o, m.GetName(), m.GetNamespace(), ns))
		}
	}
	var got, want []string
	for _, w := range inv.workloads {
		if w.namespace != ns {
			out = append(out, fmt.Sprintf("%s in namespace %q, not %q", w, w.namespace, ns))
		}
		if len(w.pod.Spec.Containers) != 1 || len(w.pod.Spec.InitContainers) != 0 {
			out = append(out, fmt.Sprintf("%s: want exactly one container, the service's", w))
		}
		for _, c := range w.pod.Spec.Containers {
			got = append(got, c.Name)
		}
	}
	for _, b := range lab.Binaries() {
		if b.Service != lab.Loadgen || ov.Load {
			want = append(want, b.Service)
		}
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		out = append(out, fmt.Sprintf("containers %v; the lab runs %v", got, want))
	}
	if w, c := inv.workload(lab.Pager); c != nil {
		claimed := false
		for _, m := range c.VolumeMounts {
			for _, v := range w.pod.Spec.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil && m.MountPath == env(c, "PAGER_DATA") && !m.ReadOnly {
					for _, p := range inv.pvcs {
						claimed = claimed || p.Name == v.PersistentVolumeClaim.ClaimName
					}
				}
			}
		}
		if !claimed {
			out = append(out, "the pager's PAGER_DATA is not a writable mount of a PersistentVolumeClaim of this overlay")
		}
	}
	return out
}

// pager-targets: the pager's PAGER_TARGETS is a read-only mount of a
// ConfigMap of the overlay, and its rules profile every replica of a
// Deployment of more than one (a service; the load's Job is none) through Prometheus (jobs, never one Service's
// static URL), each rule's job one that a monitor scrapes (prometheus.yml's
// names, which check scrape-jobs holds the monitors to). The pager's own
// -check reads the file first, strictly, as it does when it starts.
func checkPagerTargets(inv *inventory, r *repo, _ Overlay) []string {
	w, c := inv.workload(lab.Pager)
	if c == nil {
		return []string{"no pager"}
	}
	path := env(c, "PAGER_TARGETS")
	dir, file := filepath.Split(path)
	var text string
	for _, m := range c.VolumeMounts {
		for _, v := range w.pod.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || filepath.Clean(m.MountPath) != filepath.Clean(dir) || !m.ReadOnly {
				continue
			}
			for _, cm := range inv.configMaps {
				if cm.Name == v.ConfigMap.Name {
					text = cm.Data[file]
				}
			}
		}
	}
	if text == "" {
		return []string{fmt.Sprintf("the pager's PAGER_TARGETS %q is no file of a ConfigMap mounted read-only", path)}
	}
	// The pager's own check first: strict, every field, as it starts.
	f, err := os.CreateTemp("", "pager-*.yml")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil || f.Close() != nil {
		return []string{fmt.Sprintf("writing the pager's targets: %v", err)}
	}
	if out, err := exec.Command(filepath.Join(binDir, lab.Pager), "-check", "-targets", f.Name()).CombinedOutput(); err != nil {
		return []string{fmt.Sprintf("the pager refuses its PAGER_TARGETS: %v: %s", err, strings.ReplaceAll(string(out), f.Name(), file))}
	}
	var cfg struct {
		Rules []struct {
			Name   string   `json:"name"`
			Jobs   []string `json:"jobs"`
			Static []string `json:"static"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		return []string{"the pager's targets: " + err.Error()}
	}
	jobs := map[string]bool{}
	for _, j := range r.prom.ScrapeConfigs {
		jobs[j.JobName] = true
	}
	var out []string
	profiled := map[string]bool{}
	for _, rule := range cfg.Rules {
		for _, j := range rule.Jobs {
			if !jobs[j] {
				out = append(out, fmt.Sprintf("the pager's rule %s: job %s is no scrape job", rule.Name, j))
			}
			profiled[j] = true
		}
		if len(rule.Static) > 0 {
			out = append(out, fmt.Sprintf("the pager's rule %s profiles static URLs: behind a Service, one replica of however many", rule.Name))
		}
	}
	for _, wl := range inv.workloads {
		if wl.kind == "Deployment" && wl.replicas > 1 && jobs[wl.name] && !profiled[wl.name] {
			out = append(out, fmt.Sprintf("%s runs %d replicas and no pager rule profiles its job", wl, wl.replicas))
		}
	}
	return out
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// images: burnlab/<service>:<tag>, the tags compose gives them, the
// gateway's the overlay's build.
func checkImages(inv *inventory, r *repo, ov Overlay) []string {
	var out []string
	for _, w := range inv.workloads {
		for _, c := range w.pod.Spec.Containers {
			want := r.compose.Services[c.Name].Image
			if c.Name == lab.Gateway {
				want = "burnlab/gateway:" + ov.Variant
			}
			if c.Image != want || want == "" {
				out = append(out, fmt.Sprintf("%s: image %q; compose (GATEWAY_TAG=%s) runs %q", w, c.Image, ov.Variant, want))
			}
			// burnlab's images are built, never pulled: Always would ask a
			// registry for a burnlab/* image that is not there.
			if c.ImagePullPolicy != corev1.PullIfNotPresent {
				out = append(out, fmt.Sprintf("%s: imagePullPolicy %q, want IfNotPresent", w, c.ImagePullPolicy))
			}
		}
	}
	return out
}

// hardening: every container non-root, read-only, without privilege
// escalation or capabilities, and with requests and limits.
func checkHardening(inv *inventory, _ *repo, _ Overlay) []string {
	var out []string
	for _, w := range inv.workloads {
		ps := w.pod.Spec.SecurityContext
		if ps == nil {
			ps = &corev1.PodSecurityContext{}
		}
		for _, c := range append(slices.Clone(w.pod.Spec.InitContainers), w.pod.Spec.Containers...) {
			sc := c.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			nonRoot, user := ps.RunAsNonRoot, ps.RunAsUser
			if sc.RunAsNonRoot != nil {
				nonRoot = sc.RunAsNonRoot
			}
			if sc.RunAsUser != nil {
				user = sc.RunAsUser
			}
			name := w.String() + " container " + c.Name
			if nonRoot == nil || !*nonRoot || user == nil || *user == 0 {
				out = append(out, name+": not runAsNonRoot with a non-zero runAsUser")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				out = append(out, name+": allowPrivilegeEscalation is not false")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				out = append(out, name+": readOnlyRootFilesystem is not true")
			}
			if sc.Privileged != nil && *sc.Privileged {
				out = append(out, name+": privileged")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				out = append(out, name+": capabilities not dropped (want drop: [ALL], no add)")
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[res]
				lim, hasLim := c.Resources.Limits[res]
				switch {
				case !hasReq || !hasLim:
					out = append(out, fmt.Sprintf("%s: no %s request and limit", name, res))
				case lim.Cmp(req) < 0 || req.Cmp(resource.Quantity{}) <= 0:
					out = append(out, fmt.Sprintf("%s: %s request %s, limit %s", name, res, req.String(), lim.String()))
				}
			}
		}
	}
	return out
}

// ports: each container listens where its *_LISTEN/*_ADMIN say, declares
// exactly those ports, which are the lab's and compose's; its readiness
// probe asks /readyz on the port compose's healthcheck asks; every
// Service's ports forward to a container port of the same number, so
// host:port in every URL means what it means in compose.
func checkPorts(inv *inventory, r *repo, _ Overlay) []string {
	var out []string
	want := labPorts()
	for _, w := range inv.workloads {
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			name := w.String() + " container " + c.Name
			var listens []int32
			for _, e := range c.Env {
				if strings.HasSuffix(e.Name, "_LISTEN") || strings.HasSuffix(e.Name, "_ADMIN") {
					_, p, err := net.SplitHostPort(e.Value)
					n, err2 := strconv.Atoi(p)
					if err != nil || err2 != nil {
						out = append(out, fmt.Sprintf("%s: %s=%q is not host:port", name, e.Name, e.Value))
						continue
					}
					listens = append(listens, int32(n))
				}
			}
			slices.Sort(listens)
			if got := containerPorts(c); !slices.Equal(got, listens) {
				out = append(out, fmt.Sprintf("%s: containerPorts %v, but it listens on %v", name, got, listens))
			}
			if w := slices.Sorted(slices.Values(want[c.Name])); !slices.Equal(listens, w) {
				out = append(out, fmt.Sprintf("%s: listens on %v; the lab's address table says %v", name, listens, w))
			}
			var exposed []int32
			for _, e := range r.compose.Services[c.Name].Expose {
				n, _ := strconv.Atoi(e)
				exposed = append(exposed, int32(n))
			}
			if slices.Sort(exposed); !slices.Equal(listens, exposed) {
				out = append(out, fmt.Sprintf("%s: listens on %v; compose exposes %v", name, listens, exposed))
			}
			out = append(out, checkProbes(name, c, r.compose.Services[c.Name])...)
		}
	}
	for _, s := range inv.services {
		for _, sp := range s.Spec.Ports {
			n, err := inv.serviceTarget(s, intstr.FromString(sp.Name))
			if err != nil {
				out = append(out, err.Error())
			} else if n != sp.Port {
				out = append(out, fmt.Sprintf("Service %s port %s: %d forwards to container port %d; compose's %s:%d is the container's own", s.Name, sp.Name, sp.Port, n, s.Name, sp.Port))
			}
		}
	}
	return out
}

func checkProbes(name string, c *corev1.Container, cs composeService) []string {
	var out []string
	hc := cs.Healthcheck.Test
	if len(hc) == 0 {
		return []string{name + ": compose has no healthcheck to compare with"}
	}
	_, hcPort, err := hostPort(hc[len(hc)-1])
	if err != nil {
		return []string{name + ": compose healthcheck: " + err.Error()}
	}
	hcPath := hc[len(hc)-1][strings.LastIndex(hc[len(hc)-1], "/"):]
	p := c.ReadinessProbe
	if p == nil || p.HTTPGet == nil {
		return append(out, name+": no HTTP readiness probe")
	}
	if port := containerPort(c, p.HTTPGet.Port); strconv.Itoa(int(port)) != hcPort || p.HTTPGet.Path != hcPath {
		out = append(out, fmt.Sprintf("%s: readiness probe GET %s on port %s (container port %d); compose's healthcheck asks %s on %s", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), port, hcPath, hcPort))
	}
	// Liveness must not be /readyz: a draining gateway answers 503 there
	// on purpose, and would be killed mid-drain.
	if l := c.LivenessProbe; l != nil && (l.HTTPGet == nil || l.HTTPGet.Path != "/healthz" || containerPort(c, l.HTTPGet.Port) == 0) {
		out = append(out, name+": liveness probe must GET /healthz on a container port")
	}
	return out
}

// env: every variable is one the binary reads (its -h), every argument a
// flag it has; values are compose's but for the differences listed here,
// each with its reason; URLs name a Service and a port it serves.
func checkEnv(inv *inventory, r *repo, _ Overlay) []string {
	// Where Kubernetes differs from compose on purpose.
	onlyCompose := map[string]string{
		"LOADGEN_CALIBRATE": "the shards read one shape from a ConfigMap instead of each fitting its own",
	}
	onlyK8s := map[string]string{
		"LOADGEN_SHARD":        "the Indexed Job's pods each send one shard",
		"PAGER_PROMETHEUS_URL": "the operator's Prometheus, not compose's prometheus:9090",
	}
	// installers are URLs of the operator's own Services, which no overlay
	// holds: in the namespace docs/kubernetes.md installs it in.
	installers := map[string]string{
		"PAGER_PROMETHEUS_URL": "http://prometheus-operated.monitoring.svc:9090",
	}
	differs := map[string]string{
		"LOADGEN_SHAPE":           "the shape is the ConfigMap's file",
		"LOADGEN_DURATION":        "a Job ends",
		"GATEWAY_DRAIN_GRACE":     "a Service routes by readiness, so the gateway needs its grace to leave the endpoints before it stops accepting",
		"PAGER_ALERTMANAGER_URLS": "the operator's Alertmanager replicas are the installer's to list",
	}
	var out []string
	for _, w := range inv.workloads {
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			name := w.String() + " container " + c.Name
			flags, ok := r.flags[c.Name]
			if !ok {
				out = append(out, name+": no burnlab binary of that name")
				continue
			}
			reads := map[string]bool{}
			for _, e := range flags {
				reads[e] = e != ""
			}
			cs := r.compose.Services[c.Name]
			seen := map[string]bool{}
			for _, e := range c.Env {
				seen[e.Name] = true
				if !reads[e.Name] {
					out = append(out, fmt.Sprintf("%s: env %s is read by no flag of %s", name, e.Name, c.Name))
				}
				v, err := inv.envValue(w, e)
				if err != nil {
					out = append(out, fmt.Sprintf("%s: env %s: %v", name, e.Name, err))
					continue
				}
				cv, inCompose := cs.Environment[e.Name]
				switch {
				case !inCompose && onlyK8s[e.Name] == "":
					out = append(out, fmt.Sprintf("%s: env %s is not in compose's %s", name, e.Name, c.Name))
				case inCompose && v != cv && differs[e.Name] == "":
					out = append(out, fmt.Sprintf("%s: env %s=%q; compose says %q", name, e.Name, v, cv))
				}
				switch want, ok := installers[e.Name]; {
				case ok && v != want:
					out = append(out, fmt.Sprintf("%s: env %s=%q, want the operator's Service, %s", name, e.Name, v, want))
				case !ok && strings.HasPrefix(v, "http"):
					out = append(out, inv.checkURL(name+" env "+e.Name, w.namespace, v)...)
				}
			}
			for k := range cs.Environment {
				if !seen[k] && onlyCompose[k] == "" {
					out = append(out, fmt.Sprintf("%s: compose sets %s, this container does not", name, k))
				}
			}
			for _, a := range append(slices.Clone(c.Command), c.Args...) {
				if f, ok := strings.CutPrefix(a, "-"); ok {
					f, _, _ = strings.Cut(strings.TrimPrefix(f, "-"), "=")
					if _, ok := flags[f]; !ok {
						out = append(out, fmt.Sprintf("%s: argument %s is no flag of %s", name, a, c.Name))
					}
				}
			}
			if len(cs.Command) > 0 && !slices.Equal(c.Args, cs.Command) {
				out = append(out, fmt.Sprintf("%s: args %q; compose runs %q", name, c.Args, cs.Command))
			}
		}
	}
	return out
}

// envValue is what a variable holds in the pod: its value, or the key of
// the Secret or ConfigMap of this overlay it names.
func (inv *inventory) envValue(w workload, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	if ref := e.ValueFrom.SecretKeyRef; ref != nil {
		for _, s := range inv.secrets {
			if s.Namespace == w.namespace && s.Name == ref.Name {
				if v, ok := s.Data[ref.Key]; ok {
					return string(v), nil
				}
				if v, ok := s.StringData[ref.Key]; ok {
					return v, nil
				}
			}
		}
		return "", fmt.Errorf("no Secret %s with key %s", ref.Name, ref.Key)
	}
	if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
		for _, cm := range inv.configMaps {
			if cm.Namespace == w.namespace && cm.Name == ref.Name {
				if v, ok := cm.Data[ref.Key]; ok {
					return v, nil
				}
			}
		}
		return "", fmt.Errorf("no ConfigMap %s with key %s", ref.Name, ref.Key)
	}
	return "", fmt.Errorf("valueFrom %+v: not a Secret or ConfigMap key", e.ValueFrom)
}

// checkURL: the URL's host is a Service of this overlay (by its short name
// from the same namespace, or name.namespace.svc), its port one the
// Service serves.
func (inv *inventory) checkURL(from, ns, raw string) []string {
	host, port, err := hostPort(raw)
	if err != nil {
		return []string{from + ": " + err.Error()}
	}
	name, rest, _ := strings.Cut(host, ".")
	if rest != "" {
		svcNS, suffix, _ := strings.Cut(rest, ".")
		if suffix != "svc" && suffix != "svc.cluster.local" {
			return []string{fmt.Sprintf("%s: %s is not a Service name", from, host)}
		}
		ns = svcNS
	}
	s := inv.service(ns, name)
	if s == nil {
		return []string{fmt.Sprintf("%s: %s names no Service in namespace %s", from, raw, ns)}
	}
	n, _ := strconv.Atoi(port)
	if _, err := inv.serviceTarget(s, intstr.FromInt32(int32(n))); err != nil {
		return []string{fmt.Sprintf("%s: %s: %v", from, raw, err)}
	}
	return nil
}

// scrape-jobs: one ServiceMonitor or PodMonitor per job of
// prometheus.yml (the loadgen's only with the load), giving `job` the same
// name, scraping the port and path that job scrapes in compose, as often.
func checkScrapeJobs(inv *inventory, r *repo, ov Overlay) []string {
	var out []string
	type target struct{ path, port, interval, timeout string }
	want := map[string]target{}
	for _, j := range r.prom.ScrapeConfigs {
		if j.JobName == lab.Loadgen && !ov.Load {
			continue
		}
		p := j.MetricsPath
		if p == "" {
			p = "/metrics"
		}
		// One target, or the replicas of one process (the Alertmanager
		// pair), which one monitor scrapes on one port.
		if len(j.StaticConfigs) != 1 || len(j.StaticConfigs[0].Targets) == 0 {
			out = append(out, fmt.Sprintf("prometheus.yml job %s: want one target or replicas", j.JobName))
			continue
		}
		_, port, _ := net.SplitHostPort(j.StaticConfigs[0].Targets[0])
		for _, tg := range j.StaticConfigs[0].Targets[1:] {
			if _, p, _ := net.SplitHostPort(tg); p != port {
				out = append(out, fmt.Sprintf("prometheus.yml job %s: targets on ports %s and %s, want replicas on one", j.JobName, port, p))
			}
		}
		want[j.JobName] = target{p, port, r.prom.Global.ScrapeInterval, r.prom.Global.ScrapeTimeout}
	}
	got := map[string][]target{}
	for _, sm := range inv.serviceMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			out = append(out, fmt.Sprintf("ServiceMonitor %s: %v", sm.Name, err))
			continue
		}
		var svcs []*corev1.Service
		if !sm.Spec.NamespaceSelector.Any {
			for _, s := range inv.services {
				if s.Namespace == sm.Namespace && sel.Matches(labels.Set(s.Labels)) {
					svcs = append(svcs, s)
				}
			}
		}
		for _, ep := range sm.Spec.Endpoints {
			job, port := "", ""
			switch {
			case len(svcs) == 1:
				job = svcs[0].Name
				if sm.Spec.JobLabel != "" {
					job = svcs[0].Labels[sm.Spec.JobLabel]
				}
				var n int32
				if ep.Port != "" {
					n, err = inv.serviceTarget(svcs[0], intstr.FromString(ep.Port))
				} else if ep.TargetPort != nil {
					for _, w := range inv.selected(svcs[0].Namespace, labels.SelectorFromSet(svcs[0].Spec.Selector)) {
						n = containerPort(&w.pod.Spec.Containers[0], *ep.TargetPort)
					}
				}
				if err != nil {
					out = append(out, fmt.Sprintf("ServiceMonitor %s: %v", sm.Name, err))
				}
				port = strconv.Itoa(int(n))
			case sm.Spec.NamespaceSelector.Any && ep.TargetPort != nil:
				// The operator's own Services, outside this overlay: the
				// port by number is all there is to compare.
				port = ep.TargetPort.String()
			default:
				out = append(out, fmt.Sprintf("ServiceMonitor %s selects %d Services of this overlay, want one", sm.Name, len(svcs)))
			}
			job = relabeledJob(job, ep.RelabelConfigs)
			got[job] = append(got[job], target{ep.Path, port, string(ep.Interval), string(ep.ScrapeTimeout)})
		}
	}
	for _, pm := range inv.podMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil {
			out = append(out, fmt.Sprintf("PodMonitor %s: %v", pm.Name, err))
			continue
		}
		ws := inv.selected(pm.Namespace, sel)
		if len(ws) != 1 {
			out = append(out, fmt.Sprintf("PodMonitor %s selects %v, want one workload", pm.Name, ws))
			continue
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			job := pm.Namespace + "/" + pm.Name // the operator's default
			if pm.Spec.JobLabel != "" {
				job = ws[0].pod.Labels[pm.Spec.JobLabel]
			}
			job = relabeledJob(job, ep.RelabelConfigs)
			var port int32
			if ep.Port != nil {
				port = containerPort(&ws[0].pod.Spec.Containers[0], intstr.FromString(*ep.Port))
			}
			got[job] = append(got[job], target{ep.Path, strconv.Itoa(int(port)), string(ep.Interval), string(ep.ScrapeTimeout)})
		}
	}
	for job, w := range want {
		g := got[job]
		if len(g) != 1 {
			out = append(out, fmt.Sprintf("job %s: %d monitors give it; want one, as prometheus.yml scrapes it once", job, len(g)))
			continue
		}
		if g[0] != w {
			out = append(out, fmt.Sprintf("job %s scrapes %+v; prometheus.yml scrapes %+v", job, g[0], w))
		}
	}
	for job := range got {
		if _, ok := want[job]; !ok {
			out = append(out, fmt.Sprintf("job %q is no job of prometheus.yml: rules and dashboard queries would not find it", job))
		}
	}
	return out
}

// relabeledJob applies the relabelings that set `job` to a fixed value.
func relabeledJob(job string, rcs []monitoringv1.RelabelConfig) string {
	for _, rc := range rcs {
		if rc.TargetLabel == "job" && len(rc.SourceLabels) == 0 && (rc.Action == "" || strings.EqualFold(rc.Action, "replace")) && rc.Replacement != nil {
			job = *rc.Replacement
		}
	}
	return job
}

// rules: one PrometheusRule, whose groups are exactly those of the
// overlay's rule file, and which promtool accepts.
func checkRules(inv *inventory, r *repo, ov Overlay) []string {
	if len(inv.rules) != 1 {
		return []string{fmt.Sprintf("%d PrometheusRules, want one", len(inv.rules))}
	}
	want, err := ReadRuleGroups(filepath.Join(r.root, RuleFile(ov.Windows)))
	if err != nil {
		return []string{err.Error()}
	}
	pr := inv.rules[0]
	var out []string
	if !reflect.DeepEqual(pr.Spec.Groups, want) {
		out = append(out, fmt.Sprintf("PrometheusRule %s differs from %s%s: run make k8s", pr.Name, RuleFile(ov.Windows), firstDiff(pr.Spec.Groups, want)))
	}
	b, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		return append(out, err.Error())
	}
	f := filepath.Join(os.TempDir(), fmt.Sprintf("burnlab-k8s-rules-%d-%s.yml", os.Getpid(), ov.Name))
	defer os.Remove(f)
	if err := os.WriteFile(f, b, 0o644); err != nil {
		return append(out, err.Error())
	}
	if o, err := exec.Command("promtool", "check", "rules", f).CombinedOutput(); err != nil {
		out = append(out, fmt.Sprintf("promtool check rules on PrometheusRule %s: %v\n%s", pr.Name, err, o))
	}
	return out
}

// firstDiff names the first rule that differs, for a readable failure.
func firstDiff(got, want []monitoringv1.RuleGroup) string {
	if len(got) != len(want) {
		return fmt.Sprintf(" (%d groups, want %d)", len(got), len(want))
	}
	for i := range got {
		if len(got[i].Rules) != len(want[i].Rules) || got[i].Name != want[i].Name {
			return fmt.Sprintf(" (group %q)", want[i].Name)
		}
		for j := range got[i].Rules {
			if !reflect.DeepEqual(got[i].Rules[j], want[i].Rules[j]) {
				g, _ := json.Marshal(got[i].Rules[j])
				return fmt.Sprintf(" (group %q rule %d: %s)", want[i].Name, j, g)
			}
		}
	}
	return ""
}

// alertmanager: the AlertmanagerConfig routes, groups, inhibits and
// delivers as alertmanager/alertmanager.yml does, to the pager's Service.
func checkAlertmanagerConfig(inv *inventory, r *repo, _ Overlay) []string {
	if len(inv.amConfigs) != 1 {
		return []string{fmt.Sprintf("%d AlertmanagerConfigs, want one", len(inv.amConfigs))}
	}
	ac := inv.amConfigs[0]
	var out []string
	rt := ac.Spec.Route
	if rt == nil {
		return []string{"AlertmanagerConfig has no route"}
	}
	am := r.am.Route
	gw, gi, ri := dur(rt.GroupWait), dur(rt.GroupInterval), dur(rt.RepeatInterval)
	if rt.Receiver != am.Receiver || !slices.Equal(rt.GroupBy, am.GroupBy) || gw != am.GroupWait || gi != am.GroupInterval || ri != am.RepeatInterval {
		out = append(out, fmt.Sprintf("route %s by %v, %s/%s/%s; alertmanager.yml %s by %v, %s/%s/%s", rt.Receiver, rt.GroupBy,
			gw, gi, ri, am.Receiver, am.GroupBy, am.GroupWait, am.GroupInterval, am.RepeatInterval))
	}
	// The one difference, and why it is safe: every alert of the rules
	// carries the label it matches on.
	if top := matchers(rt.Matchers); !slices.Equal(top, []string{`sloth_service="llm-gateway"`}) {
		out = append(out, fmt.Sprintf("top route matches %v; want only sloth_service=\"llm-gateway\" (a shared Alertmanager)", top))
	}
	children, err := rt.ChildRoutes()
	if err != nil {
		return append(out, err.Error())
	}
	if len(children) != len(am.Routes) {
		out = append(out, fmt.Sprintf("%d child routes; alertmanager.yml has %d", len(children), len(am.Routes)))
	} else {
		for i, c := range children {
			if c.Receiver != am.Routes[i].Receiver || !slices.Equal(matchers(c.Matchers), am.Routes[i].Matchers) {
				out = append(out, fmt.Sprintf("route %d: %v → %s; alertmanager.yml %v → %s", i, matchers(c.Matchers), c.Receiver, am.Routes[i].Matchers, am.Routes[i].Receiver))
			}
		}
	}
	if len(ac.Spec.InhibitRules) != len(r.am.InhibitRules) {
		out = append(out, fmt.Sprintf("%d inhibit rules; alertmanager.yml has %d", len(ac.Spec.InhibitRules), len(r.am.InhibitRules)))
	} else {
		for i, ir := range ac.Spec.InhibitRules {
			w := r.am.InhibitRules[i]
			if !slices.Equal(matchers(ir.SourceMatch), w.SourceMatchers) || !slices.Equal(matchers(ir.TargetMatch), w.TargetMatchers) || !slices.Equal(ir.Equal, w.Equal) {
				out = append(out, fmt.Sprintf("inhibit rule %d: %v over %v equal %v; alertmanager.yml %v over %v equal %v", i,
					matchers(ir.SourceMatch), matchers(ir.TargetMatch), ir.Equal, w.SourceMatchers, w.TargetMatchers, w.Equal))
			}
		}
	}
	if len(ac.Spec.Receivers) != len(r.am.Receivers) {
		return append(out, fmt.Sprintf("%d receivers; alertmanager.yml has %d", len(ac.Spec.Receivers), len(r.am.Receivers)))
	}
	for i, rc := range ac.Spec.Receivers {
		w := r.am.Receivers[i]
		if rc.Name != w.Name || len(rc.WebhookConfigs) != len(w.WebhookConfigs) {
			out = append(out, fmt.Sprintf("receiver %d: %s with %d webhooks; alertmanager.yml %s with %d", i, rc.Name, len(rc.WebhookConfigs), w.Name, len(w.WebhookConfigs)))
			continue
		}
		for j, wh := range rc.WebhookConfigs {
			ww := w.WebhookConfigs[j]
			if wh.URL == nil {
				out = append(out, fmt.Sprintf("receiver %s: webhook without url", rc.Name))
				continue
			}
			u := *wh.URL
			_, port, _ := hostPort(u)
			_, wport, _ := hostPort(ww.URL)
			if path.Clean("/"+strings.SplitN(strings.SplitN(u, "//", 2)[1], "/", 2)[1]) != path.Clean("/"+strings.SplitN(strings.SplitN(ww.URL, "//", 2)[1], "/", 2)[1]) || port != wport {
				out = append(out, fmt.Sprintf("receiver %s: %s; alertmanager.yml posts to %s", rc.Name, u, ww.URL))
			}
			if wh.SendResolved == nil || *wh.SendResolved != ww.SendResolved || wh.MaxAlerts != int32(ww.MaxAlerts) {
				out = append(out, fmt.Sprintf("receiver %s: sendResolved/maxAlerts differ from alertmanager.yml", rc.Name))
			}
			out = append(out, inv.checkURL("receiver "+rc.Name, ac.Namespace, u)...)
		}
	}
	return out
}

func dur(d *monitoringv1.NonEmptyDuration) string {
	if d == nil {
		return ""
	}
	return string(*d)
}

func matchers[M interface{ String() string }](ms []M) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.String())
	}
	return out
}

// dashboard: a ConfigMap the Grafana sidecar loads, holding compose's
// dashboard byte for byte.
func checkDashboard(inv *inventory, r *repo, _ Overlay) []string {
	want, err := os.ReadFile(filepath.Join(r.root, Dashboard))
	if err != nil {
		return []string{err.Error()}
	}
	for _, cm := range inv.configMaps {
		if cm.Labels["grafana_dashboard"] != "1" {
			continue
		}
		if got, ok := cm.Data[filepath.Base(Dashboard)]; !ok || !bytes.Equal([]byte(got), want) || len(cm.Data) != 1 {
			return []string{fmt.Sprintf("ConfigMap %s does not hold %s as it is: run make k8s", cm.Name, Dashboard)}
		}
		return nil
	}
	return []string{"no ConfigMap labelled grafana_dashboard: \"1\""}
}

// pdb: the gateway keeps a replica through voluntary disruptions.
func checkPDB(inv *inventory, _ *repo, _ Overlay) []string {
	w, _ := inv.workload(lab.Gateway)
	for _, p := range inv.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || p.Namespace != w.namespace || !sel.Matches(labels.Set(w.pod.Labels)) {
			continue
		}
		if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() < 1 || p.Spec.MinAvailable.IntValue() >= int(w.replicas) {
			return []string{fmt.Sprintf("PodDisruptionBudget %s: minAvailable %v of %d gateway replicas; want at least one kept and one evictable", p.Name, p.Spec.MinAvailable, w.replicas)}
		}
		return nil
	}
	return []string{"no PodDisruptionBudget selects the gateway's pods"}
}

// shapeFile mirrors the loadgen's shape.Shape (an internal package of the
// loadgen): decoded strictly, a field the loadgen does not know fails.
type shapeFile struct {
	Rate       float64  `json:"rate"`
	LongEvery  int      `json:"long_every"`
	LongEvents int      `json:"long_events"`
	ShortMin   int      `json:"short_min"`
	ShortMax   int      `json:"short_max"`
	Seed       uint64   `json:"seed"`
	Why        []string `json:"why"`
}

var shardEnv = regexp.MustCompile(`^/([0-9]+)$`)

// load: an Indexed Job of N shards, all running at once, each told /N, and
// reading one shape from a ConfigMap mounted where LOADGEN_SHAPE points.
func checkLoadJob(inv *inventory, _ *repo, ov Overlay) []string {
	w, c := inv.workload(lab.Loadgen)
	if c == nil {
		return nil // checkServices says whether there should be one
	}
	var out []string
	j := w.job
	if j == nil {
		return []string{w.String() + ": the loadgen runs as a Job"}
	}
	if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != "Indexed" {
		out = append(out, "Job loadgen: completionMode is not Indexed: the pods would get no JOB_COMPLETION_INDEX")
	}
	m := shardEnv.FindStringSubmatch(env(c, "LOADGEN_SHARD"))
	if m == nil {
		return append(out, fmt.Sprintf("Job loadgen: LOADGEN_SHARD=%q, want /N", env(c, "LOADGEN_SHARD")))
	}
	n, _ := strconv.Atoi(m[1])
	if j.Spec.Completions == nil || j.Spec.Parallelism == nil || int(*j.Spec.Completions) != n || int(*j.Spec.Parallelism) != n {
		out = append(out, fmt.Sprintf("Job loadgen: completions %v, parallelism %v, LOADGEN_SHARD /%d: all three must be N, or shards go unsent or wait", ptrStr(j.Spec.Completions), ptrStr(j.Spec.Parallelism), n))
	}
	shapePath := env(c, "LOADGEN_SHAPE")
	data, err := inv.mountedFile(w, c, shapePath)
	if err != nil {
		return append(out, "Job loadgen: LOADGEN_SHAPE: "+err.Error())
	}
	var sh shapeFile
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sh); err != nil {
		return append(out, fmt.Sprintf("Job loadgen: shape %s: %v", shapePath, err))
	}
	if sh.Rate <= 0 || sh.LongEvery != 100 || sh.LongEvents < 1 || sh.ShortMin < 1 || sh.ShortMax < sh.ShortMin {
		out = append(out, fmt.Sprintf("Job loadgen: shape %+v; want a positive rate and one long generation in 100", sh))
	}
	return out
}

func ptrStr(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// mountedFile is the content of the file at path in container c: a key of
// a ConfigMap of this overlay mounted read-only at its directory.
func (inv *inventory) mountedFile(w workload, c *corev1.Container, p string) (string, error) {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(p) {
			continue
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			for _, cm := range inv.configMaps {
				if cm.Namespace == w.namespace && cm.Name == v.ConfigMap.Name {
					if d, ok := cm.Data[path.Base(p)]; ok {
						return d, nil
					}
					return "", fmt.Errorf("ConfigMap %s has no key %s", cm.Name, path.Base(p))
				}
			}
			return "", fmt.Errorf("volume %s names ConfigMap %s, which this overlay does not have", v.Name, v.ConfigMap.Name)
		}
	}
	return "", fmt.Errorf("%s is in no ConfigMap mounted at %s", p, path.Dir(p))
}
