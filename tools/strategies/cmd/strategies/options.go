package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"burnlab/tools/strategies"
)

// options are the command's flags.
type options struct {
	root, spec, windows, sloth, low, incidents string
	scrape, eval                               time.Duration
	rate                                       float64
	seed                                       uint64
	asJSON, showRules                          bool
	pictures, table, save                      string
	replay, slo                                string
	since                                      time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.root, "root", ".", "the burnlab checkout (for the defaults below)")
	fs.StringVar(&o.spec, "spec", "prometheus/slo/llm-gateway.yml", "the Sloth spec, relative to -root unless absolute")
	fs.StringVar(&o.windows, "windows", "production,prometheus/slo/windows/lab", "comma-separated window tables: production (Sloth's built-in 30 days) or a directory holding one AlertWindows file")
	fs.DurationVar(&o.scrape, "scrape", 5*time.Second, "scrape interval of a window table read from a directory")
	fs.DurationVar(&o.eval, "eval", 5*time.Second, "evaluation interval of a window table read from a directory")
	fs.StringVar(&o.sloth, "sloth", "bin/sloth", "the Sloth CLI, relative to -root unless absolute")
	fs.Float64Var(&o.rate, "rate", 25, "the lab's traffic, streams per second (the calibrated shape's rate)")
	fs.StringVar(&o.low, "low-rates", "1,0.1,0.016667", "comma-separated low traffic levels, streams per second (default one a second, six and one a minute); their bad streams come at random")
	fs.StringVar(&o.incidents, "incidents", "", "comma-separated incidents to run (default all; the healthy week always runs)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object per cell instead of the tables")
	fs.BoolVar(&o.showRules, "rules", false, "print every strategy's rules first")
	fs.StringVar(&o.pictures, "pictures", "", "write one SVG per incident and window table into this directory")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random bad streams")
	fs.StringVar(&o.table, "table", "", "with -save, also rewrite the production detection table between this Markdown file's strategies markers")
	fs.StringVar(&o.save, "save", "", "also write the tables as a result file, Markdown with its revision, date and machine (make strategies SAVE=1: docs/results/strategies.md)")
	fs.StringVar(&o.replay, "replay", "", "run nothing synthetic: replay the shipped rules over this Prometheus's own samples of the gateway (its http://host:port) and compare each alert's first firing with its ALERTS series; needs one -windows table and -slo")
	fs.StringVar(&o.slo, "slo", "", "with -replay, the SLO whose alerts to compare")
	fs.DurationVar(&o.since, "since", time.Hour, "with -replay, how far back to read")
}

// at is a path relative to -root unless absolute.
func (o *options) at(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(o.root, p)
}

// Validate reads the spec and the window tables the flags name, says
// every flag that is wrong, and returns the backtest's Config.
func (o *options) Validate() (strategies.Config, error) {
	var errs []error
	cfg := strategies.Config{Sloth: o.at(o.sloth), Workers: runtime.GOMAXPROCS(0), Seed: o.seed,
		Traffic: []strategies.Traffic{{Name: "lab", Rate: o.rate}}}
	sp, err := strategies.LoadSpec(o.at(o.spec))
	if err != nil {
		errs = append(errs, err)
	}
	cfg.Spec = sp
	if !(o.rate > 0) {
		errs = append(errs, errors.New("-rate must be positive"))
	}
	for _, r := range strings.Split(o.low, ",") {
		tr, err := strategies.LowTraffic(strings.TrimSpace(r))
		if err != nil {
			errs = append(errs, fmt.Errorf("-low-rates: %w", err))
			continue
		}
		cfg.Traffic = append(cfg.Traffic, tr)
	}
	for _, name := range strings.Split(o.windows, ",") {
		if name == "production" {
			cfg.Windows = append(cfg.Windows, strategies.Production())
			continue
		}
		w, err := strategies.LoadWindows(o.at(name), o.scrape, o.eval)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Windows = append(cfg.Windows, w)
	}
	if o.incidents != "" {
		cfg.Incidents = strings.Split(o.incidents, ",")
	}
	if o.replay != "" && (len(strings.Split(o.windows, ",")) != 1 || o.slo == "") {
		errs = append(errs, errors.New("-replay needs exactly one -windows table and -slo"))
	}
	return cfg, errors.Join(errs...)
}
