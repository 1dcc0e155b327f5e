// Command dashgen writes burnlab's Grafana dashboard JSON, built in Go with
// the Grafana Foundation SDK (make dashboards).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"burnlab/grafana/internal/dashboard"
	"burnlab/shared/service"
)

func main() {
	service.Main("dashgen", func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet("dashgen", flag.ContinueOnError)
		out := fs.String("o", "grafana/dashboards/llm-gateway-slo.json", "where to write the dashboard")
		if err := service.Parse(fs, args, nil); err != nil {
			return err
		}
		b, err := dashboard.JSON()
		if err != nil {
			return fmt.Errorf("building the dashboard: %w", err)
		}
		return os.WriteFile(*out, b, 0o644)
	})
}
