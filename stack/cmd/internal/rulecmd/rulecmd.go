// Package rulecmd is the command line of the steps that rewrite a rule
// file Sloth generated (burnfacts-rules, nodata-rules): read -in, change
// it, write it back or to -out. Each step's work is its own package's.
package rulecmd

import (
	"flag"
	"fmt"
	"os"

	"burnlab/shared/service"
)

// Run parses the step's flags and runs transform over the file.
func Run(name, what string, args []string, transform func([]byte) ([]byte, error)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	in := fs.String("in", "", "the rule file Sloth generated")
	out := fs.String("out", "", "where the changed file goes (default: -in, rewritten)")
	service.Usage(fs, nil, name+": "+what+"\n\nFlags:\n")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() > 0 {
		return fmt.Errorf("%s: want -in <Sloth's rule file> and no arguments", name)
	}
	if *out == "" {
		*out = *in
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	text, err := transform(b)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, *in, err)
	}
	// The paths are the caller's own, given on its command line.
	if err := os.WriteFile(*out, text, 0o644); err != nil { //nolint:gosec // G703: see above
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
