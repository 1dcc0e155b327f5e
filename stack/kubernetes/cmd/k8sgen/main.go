// Command k8sgen writes deploy/kubernetes's generated files — the
// PrometheusRules from prometheus/rules/, the dashboard from
// grafana/dashboards/ — so they cannot drift by hand (`make k8s`).
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"burnlab/stack/kubernetes"
)

func main() {
	root := flag.String("root", "../..", "the repository")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "k8sgen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := kubernetes.Generate(root)
	if err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(root, rel), files[rel], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		fmt.Println("wrote", rel)
	}
	return nil
}
