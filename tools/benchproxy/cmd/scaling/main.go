// Command scaling is the complexity gate (`make scaling`): streams of
// 1,000 to 16,000 events through each gateway build, the bytes allocated
// and the CPU per stream at each length, and the power law each grows by.
// It fails when a gated build's bytes grow faster than n^1.2, the check
// that would have stopped the write-up's O(n²) transcript before it merged.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"burnlab/shared/results"
	"burnlab/shared/service"
	"burnlab/tools/benchproxy"
)

func main() {
	service.Main("scaling", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

// options are the command's flags.
type options struct {
	root, sizes, builds, gate string
	minStreams                int
	minWall                   time.Duration
	seed                      uint64
	json, save, picture       string
}

// config turns the options into the run's configuration, and says what is
// wrong with them.
func (o options) config(log io.Writer) (benchproxy.ScalingConfig, error) {
	var sizes []int
	for _, f := range strings.Split(o.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return benchproxy.ScalingConfig{}, fmt.Errorf("-sizes %q: %w", o.sizes, err)
		}
		sizes = append(sizes, n)
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return benchproxy.ScalingConfig{}, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		return benchproxy.ScalingConfig{}, errors.New("run scaling from the repository root (make scaling), or give -root")
	}
	var builds []string
	for _, b := range strings.Split(o.builds, ",") {
		builds = append(builds, strings.TrimSpace(b))
	}
	for _, g := range o.gated() {
		if !slices.Contains(builds, g) {
			return benchproxy.ScalingConfig{}, fmt.Errorf("-gate %s: not among -builds %s", g, o.builds)
		}
	}
	cfg := benchproxy.ScalingConfig{Root: root, Builds: builds, Sizes: sizes, MinStreams: o.minStreams, MinWall: o.minWall, Seed: o.seed, Log: log}
	return cfg, cfg.Validate()
}

func (o options) gated() []string {
	if o.gate == "" {
		return nil
	}
	return strings.Split(o.gate, ",")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scaling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.sizes, "sizes", "1000,2000,4000,8000,16000", "comma-separated content events per stream")
	fs.StringVar(&o.builds, "builds", "fixed,baseline", "comma-separated gateway builds to measure")
	fs.StringVar(&o.gate, "gate", "fixed", fmt.Sprintf("comma-separated builds whose bytes per stream must grow no faster than n^%.1f, or \"\" for none", benchproxy.MaxAllocExponent))
	fs.IntVar(&o.minStreams, "min-streams", 3, "measure each size over at least this many streams")
	fs.DurationVar(&o.minWall, "min-wall", time.Second, "and over at least this long")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the streams' tokens")
	fs.StringVar(&o.json, "json", "", "also write one JSON object per build (variant, exponents, points) to this file")
	fs.StringVar(&o.save, "save", "", "also write the run as a result file (make scaling SAVE=1: docs/results/scaling.md)")
	fs.StringVar(&o.picture, "picture", "", "also draw both costs against the stream's length, log-log, into this SVG")
	fs.StringVar(&o.root, "root", ".", "the repository (the gateways are built from it)")
	if err := service.Parse(fs, args, nil); err != nil {
		return err
	}
	cfg, err := o.config(stderr)
	if err != nil {
		return err
	}
	rep, err := benchproxy.RunScaling(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	var table strings.Builder
	if err := benchproxy.WriteScalingTable(io.MultiWriter(stdout, &table), rep); err != nil {
		return err
	}
	if o.json != "" {
		b, err := json.MarshalIndent(rep.Builds, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.json, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	if o.picture != "" {
		if err := drawScaling(o.picture, rep); err != nil {
			return fmt.Errorf("-picture: %w", err)
		}
	}
	if o.save != "" {
		notes := []string{"flags: " + flagsSet(fs),
			"exponents, unlike seconds, compare across runs and machines; the CPU's is the noisier, since other work on the machine shows in it"}
		if o.picture != "" {
			rel, err := filepath.Rel(filepath.Dir(o.save), o.picture)
			if err != nil {
				return fmt.Errorf("-picture beside -save: %w", err)
			}
			notes = append(notes, "picture: !["+"both builds' bytes and CPU per stream against its length]("+filepath.ToSlash(rel)+")")
		}
		if err := results.Write(o.save, results.Run{Title: "The complexity gate", By: "`make scaling SAVE=1` (tools/benchproxy/cmd/scaling)",
			Root: cfg.Root, Date: rep.Started, Machine: []string{rep.Machine.Kernel, "load average " + rep.Machine.Load + " at the start"},
			Notes: notes, Body: table.String()}); err != nil {
			return fmt.Errorf("-save: %w", err)
		}
	}
	var failed []error
	for _, b := range rep.Builds {
		if slices.Contains(o.gated(), b.Variant) {
			failed = append(failed, b.CheckAlloc(benchproxy.MaxAllocExponent))
		}
	}
	return errors.Join(failed...)
}

// flagsSet lists the flags given, but the output files', for the result
// file: what a reader needs to run the same measurement.
func flagsSet(fs *flag.FlagSet) string {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains([]string{"save", "picture", "json", "root"}, f.Name) {
			set = append(set, "-"+f.Name+" "+f.Value.String())
		}
	})
	if len(set) == 0 {
		return "none: the defaults"
	}
	return "`" + strings.Join(set, " ") + "`"
}
