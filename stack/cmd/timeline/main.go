// Command timeline is `make timeline`: the write-up's three days on the
// native lab in its compressed time (package timeline). It prints the p99
// of every compressed hour, when the ticket and the page reached the pager
// and the verdict each carried, and fails when the story does not hold:
// the baseline must ticket before it pages, each naming the transcript's
// quadratic growth, and the fixed build must stay silent.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"burnlab/shared/results"
	"burnlab/shared/service"
	"burnlab/stack/timeline"
)

func main() {
	service.Main("timeline", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout) })
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("timeline", flag.ContinueOnError)
	var o options
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, release, err := o.config(stdout)
	if err != nil {
		return err
	}
	defer release()
	if warning := o.meaning(); warning != "" {
		fmt.Fprintln(stdout, "timeline: "+warning)
	}
	started, revision := time.Now(), results.Revision(cfg.Root) // what the lab builds
	r, err := timeline.Run(ctx, cfg)
	if err != nil {
		return err
	}
	var body strings.Builder
	writeSummary(&body, r)
	fmt.Fprint(stdout, "\n"+body.String())
	if o.json != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.json, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	check := r.Check()
	if o.save != "" {
		notes := []string{fmt.Sprintf("the %s build, the write-up's three days in %s (the lab's windows run %dx faster than production's)", r.Variant, o.duration, timeline.Compression)}
		if w := o.meaning(); w != "" {
			notes = append(notes, w)
		}
		if check != nil {
			notes = append(notes, "the story did not hold: "+strings.ReplaceAll(check.Error(), "\n", "; "))
		}
		if err := results.Write(o.save, results.Run{Title: "The write-up's three days, live: the " + r.Variant + " build",
			By: "`make timeline SAVE=1` (stack/cmd/timeline)", Root: cfg.Root, Revision: revision, Date: started, Notes: notes, Body: body.String()}); err != nil {
			return err
		}
	}
	return check
}

// writeSummary is the run in words: each compressed hour, then the ticket
// and the page, their times in the run's own hours, as the hours above.
func writeSummary(w io.Writer, r timeline.Result) {
	hours := func(s float64) float64 { return s / r.DurationS * timeline.Days.Hours() }
	for _, h := range r.Hours {
		fmt.Fprintln(w, h)
	}
	at := func(s *float64) string {
		if s == nil {
			return "did not fire"
		}
		return fmt.Sprintf("fired %s into the run: hour %.0f of the three days", (time.Duration(*s) * time.Second).Round(time.Second), hours(*s))
	}
	fmt.Fprintf(w, "\nticket: %s\n", at(r.TicketS))
	if r.TicketVerdict != "" {
		fmt.Fprintf(w, "  verdict: %s\n", r.TicketVerdict)
	}
	fmt.Fprintf(w, "page:   %s\n", at(r.PageS))
	if r.PageVerdict != "" {
		fmt.Fprintf(w, "  verdict: %s\n", r.PageVerdict)
	}
	if r.TicketS != nil && r.PageS != nil {
		lead := *r.PageS - *r.TicketS
		fmt.Fprintf(w, "the ticket came %s before the page: %.0f hours of the three days\n", (time.Duration(lead) * time.Second).Round(time.Second), hours(lead))
	}
}
