// Command pager is burnlab's on-call: an Alertmanager webhook receiver that
// logs PAGE / TICKET / RESOLVED, keeps every notification durably, serves
// the incidents with their timelines, captures the gateway's heap profile
// when a page fires and again once it resolves, reads a new page's facts
// (its burn, budget and slowest requests from Prometheus, and what changed
// in the heap, from delta profiles it samples all along), and shows it all
// as web pages with pprof's own UI. Its flags fill options (options.go);
// the work is pager.Run.
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"burnlab/pager/internal/pager"
	"burnlab/shared/service"
)

func main() {
	service.Main("pager", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.register(fs)
	service.Usage(fs, envs, "pager: an Alertmanager webhook receiver for burnlab's on-call\n\nFlags:\n")
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	log, err := service.NewLogger(stderr, o.logLevel, "pager")
	if err != nil {
		return err
	}
	cfg, err := o.Validate()
	if err != nil {
		return err
	}
	if o.check {
		log.Info().Msg("the flags and the -targets file are good")
		return nil
	}
	cfg.Log = log
	return pager.Run(ctx, cfg)
}
