package main

import (
	"errors"
	"io"

	"burnlab/loadgen/internal/load"
)

// compare prints the write-up's "What actually moved" table from two
// reports.
func compare(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return errors.New("usage: loadgen compare baseline.json fixed.json")
	}
	base, err := load.ReadReport(args[0])
	if err != nil {
		return err
	}
	fixed, err := load.ReadReport(args[1])
	if err != nil {
		return err
	}
	if base.Name == "" {
		base.Name = "baseline"
	}
	if fixed.Name == "" {
		fixed.Name = "fixed"
	}
	return load.Compare(stdout, base, fixed)
}
