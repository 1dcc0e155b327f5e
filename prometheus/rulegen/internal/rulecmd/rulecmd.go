// Package rulecmd is the command line of the steps that rewrite a rule
// file Sloth generated (guard-rules, burnfacts-rules, nodata-rules): read
// -in, change it, write it back or to -out. Each step's work is its own
// package's.
package rulecmd

import (
	"flag"
	"fmt"
	"os"

	"burnlab/shared/service"
)

// Run parses the step's flags and runs transform over the file.
func Run(name, what string, args []string, transform func([]byte) ([]byte, error)) error {
	return run(name, what, args, false, func(rules, _ []byte) ([]byte, error) { return transform(rules) })
}

// RunWithSpec is Run for a step that also reads the Sloth spec the file
// was generated from (-spec).
func RunWithSpec(name, what string, args []string, transform func(rules, spec []byte) ([]byte, error)) error {
	return run(name, what, args, true, transform)
}

func run(name, what string, args []string, withSpec bool, transform func(rules, spec []byte) ([]byte, error)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	in := fs.String("in", "", "the rule file Sloth generated")
	out := fs.String("out", "", "where the changed file goes (default: -in, rewritten)")
	var specPath *string
	if withSpec {
		specPath = fs.String("spec", "", "the Sloth spec the rule file was generated from")
	}
	service.Usage(fs, nil, name+": "+what+"\n\nFlags:\n")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() > 0 {
		return fmt.Errorf("%s: want -in <Sloth's rule file> and no arguments", name)
	}
	var spec []byte
	if withSpec {
		if *specPath == "" {
			return fmt.Errorf("%s: want -spec <the Sloth spec>", name)
		}
		var err error
		if spec, err = os.ReadFile(*specPath); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if *out == "" {
		*out = *in
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	text, err := transform(b, spec)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, *in, err)
	}
	// The paths are the caller's own, given on its command line.
	if err := os.WriteFile(*out, text, 0o644); err != nil { //nolint:gosec // G703: see above
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
