// Command nodata-rules appends to a rule file Sloth generated the alert
// that an SLO's SLI has no data (package nodata). `make rules` runs it
// after Sloth, and `make check-rules` runs both again to compare.
//
//	nodata-rules -in rules/slo-lab.yml [-out rules/slo-lab.yml]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"burnlab/shared/service"
	"burnlab/stack/nodata"
)

func main() {
	service.Main("nodata-rules", func(_ context.Context, args []string) error { return run(args) })
}

func run(args []string) error {
	fs := flag.NewFlagSet("nodata-rules", flag.ContinueOnError)
	in := fs.String("in", "", "the rule file Sloth generated")
	out := fs.String("out", "", "where the file with the no-data alert goes (default: -in, rewritten)")
	service.Usage(fs, nil, "nodata-rules: append the SLI no-data alert to a Sloth rule file\n\nFlags:\n")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() > 0 {
		return errors.New("nodata-rules: want -in <Sloth's rule file> and no arguments")
	}
	if *out == "" {
		*out = *in
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("nodata-rules: %w", err)
	}
	text, err := nodata.Append(b)
	if err != nil {
		return fmt.Errorf("nodata-rules: %s: %w", *in, err)
	}
	// The paths are the caller's own, given on its command line.
	if err := os.WriteFile(*out, text, 0o644); err != nil { //nolint:gosec // G703: see above
		return fmt.Errorf("nodata-rules: %w", err)
	}
	return nil
}
