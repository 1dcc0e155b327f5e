package kubernetes

import (
	stdjson "encoding/json"
	"fmt"
	"slices"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// An inventory is one built overlay, sorted by kind.
type inventory struct {
	objs            []runtime.Object
	namespaces      []*corev1.Namespace
	workloads       []workload
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	pvcs            []*corev1.PersistentVolumeClaim
	pdbs            []*policyv1.PodDisruptionBudget
	policies        []*networkingv1.NetworkPolicy
	serviceMonitors []*monitoringv1.ServiceMonitor
	podMonitors     []*monitoringv1.PodMonitor
	rules           []*monitoringv1.PrometheusRule
	amConfigs       []*monitoringv1alpha1.AlertmanagerConfig
}

// A workload is a Deployment's or Job's pod template.
type workload struct {
	kind, name, namespace string
	replicas              int32
	pod                   *corev1.PodTemplateSpec
	job                   *batchv1.Job
}

func (w workload) String() string { return w.kind + "/" + w.name }

func newInventory(objs []runtime.Object) (*inventory, error) {
	inv := &inventory{objs: objs}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			inv.namespaces = append(inv.namespaces, o)
		case *appsv1.Deployment:
			r := int32(1)
			if o.Spec.Replicas != nil {
				r = *o.Spec.Replicas
			}
			inv.workloads = append(inv.workloads, workload{"Deployment", o.Name, o.Namespace, r, &o.Spec.Template, nil})
		case *batchv1.Job:
			r := int32(1)
			if o.Spec.Parallelism != nil {
				r = *o.Spec.Parallelism
			}
			inv.workloads = append(inv.workloads, workload{"Job", o.Name, o.Namespace, r, &o.Spec.Template, o})
		case *corev1.Service:
			inv.services = append(inv.services, o)
		case *corev1.ConfigMap:
			inv.configMaps = append(inv.configMaps, o)
		case *corev1.Secret:
			inv.secrets = append(inv.secrets, o)
		case *corev1.PersistentVolumeClaim:
			inv.pvcs = append(inv.pvcs, o)
		case *policyv1.PodDisruptionBudget:
			inv.pdbs = append(inv.pdbs, o)
		case *networkingv1.NetworkPolicy:
			inv.policies = append(inv.policies, o)
		case *monitoringv1.ServiceMonitor:
			inv.serviceMonitors = append(inv.serviceMonitors, o)
		case *monitoringv1.PodMonitor:
			inv.podMonitors = append(inv.podMonitors, o)
		case *monitoringv1.PrometheusRule:
			inv.rules = append(inv.rules, o)
		case *monitoringv1alpha1.AlertmanagerConfig:
			inv.amConfigs = append(inv.amConfigs, o)
		default:
			return nil, fmt.Errorf("%T: a kind the checks do not look at", o)
		}
	}
	return inv, nil
}

// build builds an overlay of a deploy/kubernetes tree into an inventory.
func build(t *testing.T, deploy string, ov Overlay) (*inventory, error) {
	t.Helper()
	objs, err := Build(ov.Dir(deploy))
	if err != nil {
		return nil, err
	}
	return newInventory(objs)
}

// workload returns the workload whose container is named svc.
func (inv *inventory) workload(svc string) (workload, *corev1.Container) {
	for _, w := range inv.workloads {
		for i := range w.pod.Spec.Containers {
			if c := &w.pod.Spec.Containers[i]; c.Name == svc {
				return w, c
			}
		}
	}
	return workload{}, nil
}

// selected lists the workloads whose pods a selector in namespace ns picks.
func (inv *inventory) selected(ns string, sel labels.Selector) []workload {
	var out []workload
	for _, w := range inv.workloads {
		if w.namespace == ns && sel.Matches(labels.Set(w.pod.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

// service finds a Service by namespace and name.
func (inv *inventory) service(ns, name string) *corev1.Service {
	for _, s := range inv.services {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

// containerPort resolves a port given by name or number to a container
// port of c, as the kubelet and Services do; 0 when c has none such.
func containerPort(c *corev1.Container, p intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

// serviceTarget resolves a Service's port (by its name, or by number) to
// the container port it forwards to in the one workload it selects.
func (inv *inventory) serviceTarget(s *corev1.Service, port intstr.IntOrString) (int32, error) {
	ws := inv.selected(s.Namespace, labels.SelectorFromSet(s.Spec.Selector))
	if len(ws) != 1 {
		return 0, fmt.Errorf("Service %s selects %v, want one workload", s.Name, ws)
	}
	for _, sp := range s.Spec.Ports {
		if (port.Type == intstr.String && sp.Name == port.StrVal) || (port.Type == intstr.Int && sp.Port == port.IntVal) {
			for _, c := range ws[0].pod.Spec.Containers {
				if n := containerPort(&c, sp.TargetPort); n != 0 {
					return n, nil
				}
			}
			return 0, fmt.Errorf("Service %s port %s forwards to %s, which no container of %s has", s.Name, sp.Name, sp.TargetPort.String(), ws[0])
		}
	}
	return 0, fmt.Errorf("Service %s has no port %s", s.Name, port.String())
}

func containerPorts(c *corev1.Container) []int32 {
	var ps []int32
	for _, p := range c.Ports {
		ps = append(ps, p.ContainerPort)
	}
	slices.Sort(ps)
	return ps
}

func json2(o runtime.Object) ([]byte, error) { return stdjson.Marshal(o) }
