// Command guard-rules adds to each window pair of the alerts in a rule
// file Sloth generated the minimum-traffic guard, and the event recordings
// it reads (package guard). `make rules` runs it after Sloth and before
// burnfacts-rules, and `make check-rules` runs every step again to
// compare.
//
//	guard-rules -in rules/slo-lab.yml -spec bin/slo-specs.yml [-out rules/slo-lab.yml]
//
// The spec may hold several services' documents: make rules joins them.
package main

import (
	"context"

	"burnlab/prometheus/rulegen/guard"
	"burnlab/prometheus/rulegen/internal/rulecmd"
	"burnlab/shared/service"
)

func main() {
	service.Main("guard-rules", func(_ context.Context, args []string) error { return run(args) })
}

func run(args []string) error {
	return rulecmd.RunWithSpec("guard-rules", "guard each Sloth alert's window pairs against too little traffic", args, guard.Append)
}
