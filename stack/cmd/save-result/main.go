// Command save-result writes a run a script measured, read from standard
// input, as a results file under docs/results (package results): headed by
// what wrote it, the revision, the date and the machine. tools/steps.sh
// saves make test's table of seconds through it under SAVE=1.
//
//	save-result -o docs/results/make-test.md -title "…" -by "…" [-note …] < table
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"burnlab/shared/results"
	"burnlab/shared/service"
)

func main() {
	service.Main("save-result", func(_ context.Context, args []string) error { return run(args, os.Stdin) })
}

// notes collects every -note, in order.
type notes []string

func (n *notes) String() string     { return strings.Join(*n, "; ") }
func (n *notes) Set(s string) error { *n = append(*n, s); return nil }

func run(args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("save-result", flag.ContinueOnError)
	out := fs.String("o", "", "the results file to write")
	title := fs.String("title", "", "its heading")
	by := fs.String("by", "", "what wrote it, e.g. \"`make test SAVE=1` (tools/steps.sh)\"")
	root := fs.String("root", ".", "the repository whose revision the run measured")
	var ns notes
	fs.Var(&ns, "note", "a line after the header (repeatable)")
	if err := service.Parse(fs, args, nil); err != nil {
		return err
	}
	if *out == "" || *title == "" || *by == "" {
		return errors.New("-o, -title and -by are required")
	}
	body, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("reading the run from standard input: %w", err)
	}
	if strings.TrimSpace(string(body)) == "" {
		return errors.New("standard input held no run to save")
	}
	return results.Write(*out, results.Run{Title: *title, By: *by, Root: *root, Date: time.Now(), Notes: ns, Body: string(body)})
}
