// Command burnfacts-rules adds to each alert of a rule file Sloth
// generated the annotations that say, at firing, the burn of each window
// of the pair that fired and the error budget (package burnfacts). `make
// rules` runs it after Sloth and before nodata-rules, and `make
// check-rules` runs all three again to compare.
//
//	burnfacts-rules -in rules/slo-lab.yml [-out rules/slo-lab.yml]
package main

import (
	"context"

	"burnlab/prometheus/rulegen/burnfacts"
	"burnlab/prometheus/rulegen/internal/rulecmd"
	"burnlab/shared/service"
)

func main() {
	service.Main("burnfacts-rules", func(_ context.Context, args []string) error { return run(args) })
}

func run(args []string) error {
	return rulecmd.Run("burnfacts-rules", "annotate each Sloth alert with its window pairs' burn and the error budget", args, burnfacts.Annotate)
}
