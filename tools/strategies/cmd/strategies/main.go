// Command strategies backtests the SRE workbook's ways to alert on an SLO,
// and two naive ones, on the scenario table's incidents, through the
// pinned Prometheus's rule engine: make strategies.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"burnlab/shared/results"
	"burnlab/tools/strategies"
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
	root := fs.String("root", ".", "the burnlab checkout (for the defaults below)")
	spec := fs.String("spec", "prometheus/slo/llm-gateway.yml", "the Sloth spec, relative to -root unless absolute")
	windows := fs.String("windows", "production,prometheus/slo/windows/lab", "comma-separated window tables: production (Sloth's built-in 30 days) or a directory holding one AlertWindows file")
	scrape := fs.Duration("scrape", 5*time.Second, "scrape interval of a window table read from a directory")
	eval := fs.Duration("eval", 5*time.Second, "evaluation interval of a window table read from a directory")
	sloth := fs.String("sloth", "bin/sloth", "the Sloth CLI, relative to -root unless absolute")
	rate := fs.Float64("rate", 25, "the lab's traffic, streams per second (the calibrated shape's rate)")
	low := fs.String("low-rates", "1,0.1,0.016667", "comma-separated low traffic levels, streams per second (default one a second, six and one a minute); their bad streams come at random")
	incidents := fs.String("incidents", "", "comma-separated incidents to run (default all; the healthy week always runs)")
	asJSON := fs.Bool("json", false, "print one JSON object per cell instead of the tables")
	showRules := fs.Bool("rules", false, "print every strategy's rules first")
	pictures := fs.String("pictures", "", "write one SVG per incident and window table into this directory")
	seed := fs.Uint64("seed", 1, "seed of the random bad streams")
	table := fs.String("table", "", "with -save, also rewrite the production detection table between this Markdown file's strategies markers")
	save := fs.String("save", "", "also write the tables as a result file, Markdown with its revision, date and machine (make strategies SAVE=1: docs/results/strategies.md)")
	replay := fs.String("replay", "", "run nothing synthetic: replay the shipped rules over this Prometheus's own samples of the gateway (its http://host:port) and compare each alert's first firing with its ALERTS series; needs one -windows table and -slo")
	sloName := fs.String("slo", "", "with -replay, the SLO whose alerts to compare")
	since := fs.Duration("since", time.Hour, "with -replay, how far back to read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	at := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(*root, p)
	}
	sp, err := strategies.LoadSpec(at(*spec))
	if err != nil {
		return err
	}
	if !(*rate > 0) {
		return errors.New("-rate must be positive")
	}
	cfg := strategies.Config{Spec: sp, Sloth: at(*sloth), Workers: runtime.GOMAXPROCS(0), Seed: *seed,
		Traffic: []strategies.Traffic{{Name: "lab", Rate: *rate}}}
	for _, r := range strings.Split(*low, ",") {
		tr, err := strategies.LowTraffic(strings.TrimSpace(r))
		if err != nil {
			return fmt.Errorf("-low-rates: %w", err)
		}
		cfg.Traffic = append(cfg.Traffic, tr)
	}
	for _, name := range strings.Split(*windows, ",") {
		if name == "production" {
			cfg.Windows = append(cfg.Windows, strategies.Production())
			continue
		}
		w, err := strategies.LoadWindows(at(name), *scrape, *eval)
		if err != nil {
			return err
		}
		cfg.Windows = append(cfg.Windows, w)
	}
	if *incidents != "" {
		cfg.Incidents = strings.Split(*incidents, ",")
	}
	if *replay != "" {
		return replayLive(ctx, *replay, cfg, *sloName, *since, stdout)
	}
	began := time.Now()
	t, err := strategies.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "strategies: %d cells in %s\n", len(t.Cells), time.Since(began).Round(time.Second))
	if *showRules {
		if err := t.WriteRules(stdout, cfg.Windows); err != nil {
			return err
		}
	}
	var text strings.Builder
	if err := t.WriteText(&text, cfg.Windows); err != nil {
		return err
	}
	if *save != "" {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "save" {
				set = append(set, "-"+f.Name+"="+f.Value.String())
			}
		})
		err := results.Write(*save, results.Run{Title: "Alerting strategies, backtested", By: "`make strategies SAVE=1` (tools/strategies/cmd/strategies)",
			Root: *root, Date: time.Now(), Notes: []string{
				fmt.Sprintf("%d cells in %s; flags: %s", len(t.Cells), time.Since(began).Round(time.Second), strings.Join(set, " ")),
				"each cell is measured through the pinned Prometheus's rule engine, with the workbook's arithmetic in brackets",
			}, Body: text.String()})
		if err != nil {
			return fmt.Errorf("-save: %w", err)
		}
	}
	// After the result file, which names the revision: a run that wrote
	// pictures first would call its own tree dirty.
	if *pictures != "" {
		if err := t.WritePictures(*pictures, cfg.Windows); err != nil {
			return err
		}
	}
	if *save != "" && *table != "" {
		if err := rewriteBlock(*table, t, cfg.Windows[0].Name); err != nil {
			return err
		}
	}
	if *asJSON {
		return t.WriteJSON(stdout)
	}
	_, err = io.WriteString(stdout, text.String())
	return err
}

// replayLive prints one JSON agreement per severity and fails when any
// disagrees.
func replayLive(ctx context.Context, url string, cfg strategies.Config, sloName string, since time.Duration, stdout io.Writer) error {
	if len(cfg.Windows) != 1 || sloName == "" {
		return errors.New("-replay needs exactly one -windows table and -slo")
	}
	o, err := cfg.Spec.SLO(sloName)
	if err != nil {
		return err
	}
	ss, err := strategies.All(ctx, cfg.Sloth, cfg.Spec, o, cfg.Windows[0])
	if err != nil {
		return err
	}
	client, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return fmt.Errorf("-replay: %w", err)
	}
	shipped, err := strategies.ByKey(ss, strategies.Shipped)
	if err != nil {
		return err
	}
	as, err := strategies.Replay(ctx, promv1.NewAPI(client), cfg.Windows[0], o, shipped, time.Now(), since)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	var bad []string
	for _, a := range as {
		if err := enc.Encode(a); err != nil {
			return err
		}
		if !a.Agree {
			bad = append(bad, a.Severity)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the replay disagrees with the live run on %s %s", sloName, strings.Join(bad, ", "))
	}
	return nil
}

// The markers around the table -table rewrites.
const (
	begin = "<!-- strategies table: make strategies SAVE=1 writes it -->"
	end   = "<!-- end of the strategies table -->"
)

// rewriteBlock replaces the table between the markers of the Markdown
// file at path with the first window table's detection table.
func rewriteBlock(path string, t strategies.Table, windows string) error {
	var md strings.Builder
	if err := t.WriteMarkdown(&md, windows); err != nil {
		return err
	}
	if err := results.ReplaceBlock(path, begin, end, md.String()); err != nil {
		return fmt.Errorf("-table: %w", err)
	}
	return nil
}
