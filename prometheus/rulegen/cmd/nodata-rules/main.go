// Command nodata-rules appends to a rule file Sloth generated the alert
// that an SLO's SLI has no data (package nodata). `make rules` runs it
// after Sloth, and `make check-rules` runs both again to compare.
//
//	nodata-rules -in rules/slo-lab.yml [-out rules/slo-lab.yml]
package main

import (
	"context"

	"burnlab/prometheus/rulegen/internal/rulecmd"
	"burnlab/prometheus/rulegen/nodata"
	"burnlab/shared/service"
)

func main() {
	service.Main("nodata-rules", func(_ context.Context, args []string) error { return run(args) })
}

func run(args []string) error {
	return rulecmd.Run("nodata-rules", "append the SLI no-data alert to a Sloth rule file", args, nodata.Append)
}
