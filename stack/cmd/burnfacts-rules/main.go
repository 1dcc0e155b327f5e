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
	"errors"
	"flag"
	"fmt"
	"os"

	"burnlab/shared/service"
	"burnlab/stack/burnfacts"
)

func main() {
	service.Main("burnfacts-rules", func(_ context.Context, args []string) error { return run(args) })
}

func run(args []string) error {
	fs := flag.NewFlagSet("burnfacts-rules", flag.ContinueOnError)
	in := fs.String("in", "", "the rule file Sloth generated")
	out := fs.String("out", "", "where the annotated file goes (default: -in, rewritten)")
	service.Usage(fs, nil, "burnfacts-rules: annotate each Sloth alert with its window pairs' burn and the error budget\n\nFlags:\n")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() > 0 {
		return errors.New("burnfacts-rules: want -in <Sloth's rule file> and no arguments")
	}
	if *out == "" {
		*out = *in
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("burnfacts-rules: %w", err)
	}
	text, err := burnfacts.Annotate(b)
	if err != nil {
		return fmt.Errorf("burnfacts-rules: %s: %w", *in, err)
	}
	// The paths are the caller's own, given on its command line.
	if err := os.WriteFile(*out, text, 0o644); err != nil { //nolint:gosec // G703: see above
		return fmt.Errorf("burnfacts-rules: %w", err)
	}
	return nil
}
