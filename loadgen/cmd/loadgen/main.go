// Command loadgen drives burnlab's gateway with an open-model SSE load:
// streams start on a schedule at -rate per second whatever the gateway's
// state, each timed from its scheduled start. `loadgen compare` prints the
// write-up's table from two reports; `loadgen calibrate` fits this machine.
// A file each: run.go, compare.go, calibrate.go.
package main

import (
	"context"
	"io"
	"os"

	"burnlab/shared/service"
)

// envs are run's flags' environment variables, as compose and Kubernetes
// set them; calibrate reads those of the flags it shares.
var envs = map[string]string{
	"target":       "LOADGEN_TARGET",
	"tenants":      "LOADGEN_TENANTS",
	"shape":        "LOADGEN_SHAPE",
	"calibrate":    "LOADGEN_CALIBRATE",
	"admin":        "LOADGEN_ADMIN",
	"direct":       "LOADGEN_DIRECT",
	"rate":         "LOADGEN_RATE",
	"duration":     "LOADGEN_DURATION",
	"max-inflight": "LOADGEN_MAX_INFLIGHT",
	"shard":        "LOADGEN_SHARD",
	"start-delay":  "LOADGEN_START_DELAY",
	"log-level":    "LOG_LEVEL",
}

func main() {
	service.Main("loadgen", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return compare(args[1:], stdout)
		case "calibrate":
			return calibrateCmd(ctx, args[1:], stdout, stderr)
		case "run":
			args = args[1:]
		}
	}
	return runLoad(ctx, args, stdout, stderr)
}

const usage = `loadgen [run] [flags]          send load, print a report (-o report.json to keep it)
loadgen compare a.json b.json  the write-up's "What actually moved" table from two reports
loadgen calibrate [flags]      fit this machine's baseline gateway and write a traffic shape

Flags of run:
`
