// Package kubernetes builds burnlab's Kubernetes manifests
// (deploy/kubernetes) the way `kubectl apply -k` does — with kustomize's
// own Go API — and decodes every object strictly into its real Go type:
// k8s.io/api for the core kinds, the Prometheus Operator's API types for
// its custom resources. There is no cluster on burnlab's machines; its
// tests hold the manifests to those schemas and to the rest of the repo
// (the binaries' flags, compose, the lab's address table, the rule files).
//
// It also writes the files deploy/kubernetes keeps as generated copies of
// the repo's (Generate), so they are never hand-kept twins.
package kubernetes

import (
	"errors"
	"fmt"
	"path/filepath"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Overlays are the kustomizations under deploy/kubernetes/overlays: the
// gateway build and SLO windows each applies, and whether it runs the load.
var Overlays = []Overlay{
	{Name: "baseline", Variant: "baseline", Windows: "lab", Load: true},
	{Name: "fixed", Variant: "fixed", Windows: "lab", Load: true},
	{Name: "production", Variant: "fixed", Windows: "production", Load: false},
}

// An Overlay is one kustomization a person applies.
type Overlay struct {
	Name, Variant, Windows string
	Load                   bool
}

// Dir is the overlay's folder under a deploy/kubernetes tree.
func (o Overlay) Dir(deploy string) string { return filepath.Join(deploy, "overlays", o.Name) }

// scheme knows every kind burnlab's manifests may hold; any other kind is
// an error, not an object passed over.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
		monitoringv1.AddToScheme, monitoringv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// Build runs kustomize on dir, as `kubectl apply -k dir` would (the same
// defaults: files only from inside the kustomization's tree), and decodes
// each object strictly: an unknown or duplicate field, or a kind this
// package does not know, fails the build.
func Build(dir string) ([]runtime.Object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var objs []runtime.Object
	var errs []error
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		obj, _, err := strict.Decode(y, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s %s: %w", r.GetKind(), r.GetName(), dir, err))
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errors.Join(errs...)
}
