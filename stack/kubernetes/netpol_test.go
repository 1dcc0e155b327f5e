package kubernetes

import (
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"burnlab/stack/lab"
)

// A peer is someone who might connect: a pod (namespace and labels) or,
// with ip set, an address outside the cluster.
type peer struct {
	name, namespace string
	labels          map[string]string
	ip              string
}

const monitoringNS = "monitoring"

// peers are who the policy is asked about: the monitoring stack, each
// burnlab service, a stranger in another namespace, a stranger wearing
// the pager's label in another namespace, and the internet.
func peers(ns string) []peer {
	name := func(n string) map[string]string { return map[string]string{"app.kubernetes.io/name": n} }
	return []peer{
		{"prometheus", monitoringNS, name("prometheus"), ""},
		{"alertmanager", monitoringNS, name("alertmanager"), ""},
		{"grafana", monitoringNS, name("grafana"), ""},
		{lab.Gateway, ns, name(lab.Gateway), ""},
		{lab.Upstream, ns, name(lab.Upstream), ""},
		{lab.Pager, ns, name(lab.Pager), ""},
		{lab.Loadgen, ns, name(lab.Loadgen), ""},
		{"stranger", "other", map[string]string{"app": "curl"}, ""},
		{"pager-lookalike", "other", name(lab.Pager), ""},
		{"internet", "", nil, "203.0.113.7"},
	}
}

// reachable says who may open each port of each burnlab container: the
// public API any client, every admin port only Prometheus and the
// pager, and the pager's own port Prometheus, Alertmanager (webhooks)
// and Grafana (its datasource).
var reachable = map[string]map[int32][]string{
	lab.Gateway:  {8080: {"*"}, 6060: {"prometheus", lab.Pager}},
	lab.Upstream: {8081: {lab.Gateway, lab.Loadgen}, 6062: {"prometheus", lab.Pager}},
	lab.Pager:    {5001: {"prometheus", "alertmanager", "grafana"}},
	lab.Loadgen:  {6061: {"prometheus"}},
}

// checkNetworkPolicy asks the NetworkPolicies, as the API defines them,
// who can reach each container port, and compares with reachable.
func checkNetworkPolicy(inv *inventory, _ *repo, _ Overlay) []string {
	var out []string
	for _, w := range inv.workloads {
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			for _, cp := range c.Ports {
				want, ok := reachable[c.Name][cp.ContainerPort]
				if !ok {
					out = append(out, fmt.Sprintf("%s port %d: nobody has said who may reach it (reachable)", c.Name, cp.ContainerPort))
					continue
				}
				var got []string
				all := true
				for _, p := range peers(w.namespace) {
					if allowed(inv.policies, w, c, cp, p) {
						got = append(got, p.name)
					} else {
						all = false
					}
				}
				if all {
					got = []string{"*"}
				}
				if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
					out = append(out, fmt.Sprintf("%s port %d (%s) is reachable from %v; want %v", c.Name, cp.ContainerPort, cp.Name, got, want))
				}
			}
		}
	}
	return out
}

// allowed is NetworkPolicy ingress semantics: a pod no policy selects
// takes anything; one that some policy selects takes what any of them
// allows, a rule with no ports any port, with no from anyone.
func allowed(policies []*networkingv1.NetworkPolicy, w workload, c *corev1.Container, cp corev1.ContainerPort, p peer) bool {
	isolated := false
	for _, np := range policies {
		if np.Namespace != w.namespace || !ingressType(np) || !matches(&np.Spec.PodSelector, w.pod.Labels) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			if portMatches(rule.Ports, c, cp) && fromMatches(rule.From, np.Namespace, p) {
				return true
			}
		}
	}
	return !isolated
}

func ingressType(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return true // the API's default: Ingress, and Egress only with egress rules
	}
	return slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func portMatches(ports []networkingv1.NetworkPolicyPort, c *corev1.Container, cp corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type == intstr.String && p.Port.StrVal == cp.Name {
			return true
		}
		if p.Port.Type == intstr.Int {
			end := p.Port.IntVal
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if cp.ContainerPort >= p.Port.IntVal && cp.ContainerPort <= end {
				return true
			}
		}
	}
	return false
}

func fromMatches(from []networkingv1.NetworkPolicyPeer, policyNS string, p peer) bool {
	if len(from) == 0 {
		return true
	}
	for _, f := range from {
		if f.IPBlock != nil {
			if p.ip != "" && cidrContains(f.IPBlock, p.ip) {
				return true
			}
			continue
		}
		if p.ip != "" {
			continue // pod and namespace selectors pick pods only
		}
		nsOK := p.namespace == policyNS
		if f.NamespaceSelector != nil {
			nsOK = matches(f.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": p.namespace})
		}
		podOK := f.PodSelector == nil || matches(f.PodSelector, p.labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func cidrContains(b *networkingv1.IPBlock, ip string) bool {
	_, n, err := parseCIDR(b.CIDR)
	if err != nil || !n.Contains(parseIP(ip)) {
		return false
	}
	for _, ex := range b.Except {
		if _, e, err := parseCIDR(ex); err == nil && e.Contains(parseIP(ip)) {
			return false
		}
	}
	return true
}

var (
	parseCIDR = net.ParseCIDR
	parseIP   = net.ParseIP
)
