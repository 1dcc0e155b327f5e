package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"burnlab/shared/results"
	"burnlab/tools/strategies"
)

// backtest runs every cell and writes the tables, and with -save the
// result file, the pictures and the docs' table.
func backtest(ctx context.Context, o options, cfg strategies.Config, set []string, stdout, stderr io.Writer) error {
	began := time.Now()
	t, err := strategies.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "strategies: %d cells in %s\n", len(t.Cells), time.Since(began).Round(time.Second))
	if o.showRules {
		if err := t.WriteRules(stdout, cfg.Windows); err != nil {
			return err
		}
	}
	var text strings.Builder
	if err := t.WriteText(&text, cfg.Windows); err != nil {
		return err
	}
	if o.save != "" {
		err := results.Write(o.save, results.Run{Title: "Alerting strategies, backtested", By: "`make strategies SAVE=1` (tools/strategies/cmd/strategies)",
			Root: o.root, Date: time.Now(), Notes: []string{
				fmt.Sprintf("%d cells in %s; flags: %s", len(t.Cells), time.Since(began).Round(time.Second), strings.Join(set, " ")),
				"each cell is measured through the pinned Prometheus's rule engine, with the workbook's arithmetic in brackets",
			}, Body: text.String()})
		if err != nil {
			return fmt.Errorf("-save: %w", err)
		}
	}
	// After the result file, which names the revision: a run that wrote
	// pictures first would call its own tree dirty.
	if o.pictures != "" {
		if err := t.WritePictures(o.pictures, cfg.Windows); err != nil {
			return err
		}
	}
	if o.save != "" && o.table != "" {
		if err := rewriteBlock(o.table, t, cfg.Windows[0].Name); err != nil {
			return err
		}
	}
	if o.asJSON {
		return t.WriteJSON(stdout)
	}
	_, err = io.WriteString(stdout, text.String())
	return err
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
