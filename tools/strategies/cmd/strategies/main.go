// Command strategies backtests the SRE workbook's ways to alert on an SLO,
// and two naive ones, on the scenario table's incidents, through the
// pinned Prometheus's rule engine: make strategies. Its flags fill options
// (options.go); backtest.go and replay.go are its two modes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "strategies:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("strategies", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg, err := o.Validate()
	if err != nil {
		return err
	}
	if o.replay != "" {
		return replayLive(ctx, o, cfg, stdout)
	}
	return backtest(ctx, o, cfg, setFlags(fs), stdout, stderr)
}

// setFlags are the flags the command line set, but -save, as the result
// file records them.
func setFlags(fs *flag.FlagSet) []string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "save" {
			set = append(set, "-"+f.Name+"="+f.Value.String())
		}
	})
	return set
}
