// Command join-rules makes one document of a rule file Sloth wrote for
// several services (package join). `make rules` runs it straight after
// Sloth, and `make check-rules` runs every step again to compare.
//
//	join-rules -in rules/slo-lab.yml [-out rules/slo-lab.yml]
package main

import (
	"context"

	"burnlab/prometheus/rulegen/internal/rulecmd"
	"burnlab/prometheus/rulegen/join"
	"burnlab/shared/service"
)

func main() {
	service.Main("join-rules", func(_ context.Context, args []string) error { return run(args) })
}

func run(args []string) error {
	return rulecmd.Run("join-rules", "join the services' documents of a Sloth rule file into one", args, join.Groups)
}
