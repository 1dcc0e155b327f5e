package strategies

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
	"go.yaml.in/yaml/v3"
)

// cellJSON is one cell as -json prints it.
type cellJSON struct {
	Windows           string       `json:"windows"`
	Strategy          string       `json:"strategy"`
	Incident          string       `json:"incident"`
	Traffic           string       `json:"traffic"`
	Detected          string       `json:"detected"`
	DetectionS        *float64     `json:"detection_s"`
	ResetS            *float64     `json:"reset_s"`
	BudgetSpent       *float64     `json:"budget_spent"`
	FalsePagesPerWeek float64      `json:"false_pages_per_week"`
	FirstTicketS      *float64     `json:"first_ticket_s"`
	FirstPageS        *float64     `json:"first_page_s"`
	Expected          expectedJSON `json:"expected"`
}

type expectedJSON struct {
	Detected     string   `json:"detected"`
	DetectionS   *float64 `json:"detection_s"`
	ResetS       *float64 `json:"reset_s"`
	BudgetSpent  *float64 `json:"budget_spent"`
	FirstTicketS *float64 `json:"first_ticket_s"`
	FirstPageS   *float64 `json:"first_page_s"`
}

func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	return &s
}

// WriteJSON writes one JSON object per cell, a line each.
func (t Table) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, c := range t.Cells {
		if err := enc.Encode(cellJSON{
			Windows: c.Windows, Strategy: c.Strategy, Incident: c.Incident, Traffic: c.Traffic,
			Detected: c.Measured.Detected, DetectionS: seconds(c.Measured.Detection), ResetS: seconds(c.Measured.Reset),
			BudgetSpent: c.Measured.BudgetSpent, FalsePagesPerWeek: c.FalsePagesPerWeek,
			FirstTicketS: seconds(c.Measured.FirstTicket), FirstPageS: seconds(c.Measured.FirstPage),
			Expected: expectedJSON{Detected: c.Expected.Detected, DetectionS: seconds(c.Expected.Detection),
				ResetS: seconds(c.Expected.Reset), BudgetSpent: c.Expected.BudgetSpent,
				FirstTicketS: seconds(c.Expected.FirstTicket), FirstPageS: seconds(c.Expected.FirstPage)},
		}); err != nil {
			return err
		}
	}
	return nil
}

// WriteText writes, for each window table, the strategies with their
// sources, then three tables — detection, reset, budget spent — each cell
// measured with the workbook's expected value in brackets, and the false
// pages of the healthy week.
func (t Table) WriteText(w io.Writer, windows []Windows) error {
	for _, win := range windows {
		ss := t.Strategies[win.Name]
		fmt.Fprintf(w, "## %s windows: a %s SLO period, scraped every %s, evaluated every %s\n\n", win.Name, dur(win.Period), dur(win.Scrape), dur(win.Eval))
		for _, s := range ss {
			fmt.Fprintf(w, "%-14s %s — %s\n", s.Key, s.Title, s.Source)
		}
		fmt.Fprintln(w)
		for _, part := range []struct {
			title string
			cell  func(Outcome) string
		}{
			{"detection: severity and time after the fault began [expected]", detection},
			{"reset: time after the fault ended until every alert resolved [expected]", reset},
			{"budget spent before detection, of the period's [expected]", budget},
		} {
			fmt.Fprintf(w, "### %s\n\n", part.title)
			tw := header(w, "incident\ttraffic", ss)
			for _, row := range t.rows(win.Name) {
				if row[0] == HealthyName {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s", row[0], row[1])
				for _, s := range ss {
					c := t.cell(win.Name, s.Key, row[0], row[1])
					fmt.Fprintf(tw, "\t%s [%s]", part.cell(c.Measured), part.cell(c.Expected))
				}
				fmt.Fprintln(tw)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "### false pages in a healthy week (%s here), bad streams at random at %gx [expected 0]\n\n", dur(scale7d(win)), Background)
		tw := header(w, "traffic", ss)
		for _, row := range t.rows(win.Name) {
			if row[0] != HealthyName {
				continue
			}
			fmt.Fprint(tw, row[1])
			for _, s := range ss {
				fmt.Fprintf(tw, "\t%g", t.cell(win.Name, s.Key, row[0], row[1]).FalsePagesPerWeek)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

// header starts a table: the row's own columns, then one per strategy.
func header(w io.Writer, first string, ss []Strategy) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, first)
	for _, s := range ss {
		fmt.Fprintf(tw, "\t%s", s.Key)
	}
	fmt.Fprintln(tw)
	return tw
}

// WriteRules writes each strategy's rules as Prometheus rule files.
func (t Table) WriteRules(w io.Writer, windows []Windows) error {
	for _, win := range windows {
		for _, s := range t.Strategies[win.Name] {
			b, err := yaml.Marshal(rulefmt.RuleGroups{Groups: s.Groups})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "# %s windows, %s: %s\n# %s\n%s\n", win.Name, s.Key, s.Title, s.Source, b)
		}
	}
	return nil
}

// rows are the table's (incident, traffic) pairs in run order.
func (t Table) rows(windows string) [][2]string {
	var out [][2]string
	seen := map[[2]string]bool{}
	for _, c := range t.Cells {
		k := [2]string{c.Incident, c.Traffic}
		if c.Windows == windows && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// cell finds one; a strategy of another SLO than the row's is not there.
func (t Table) cell(windows, strategy, incident, traffic string) Cell {
	for _, c := range t.Cells {
		if c.Windows == windows && c.Strategy == strategy && c.Incident == incident && c.Traffic == traffic {
			return c
		}
	}
	return Cell{}
}

// detection is the severity and time of the first detection; a ticket
// that came before the page is shown before it, since its lead is the
// point of a ticket.
func detection(o Outcome) string {
	if o.Detection == nil {
		return "—"
	}
	if led, ok := lead(o); ok {
		return fmt.Sprintf("T %s, P %s (%s lead)", short(*o.FirstTicket), short(*o.FirstPage), short(led))
	}
	return fmt.Sprintf("%s %s", strings.ToUpper(o.Detected[:1]), short(*o.Detection))
}

// lead is how long a ticket came before the page, when one did.
func lead(o Outcome) (time.Duration, bool) {
	if o.FirstTicket == nil || o.FirstPage == nil || *o.FirstTicket >= *o.FirstPage {
		return 0, false
	}
	return *o.FirstPage - *o.FirstTicket, true
}

func reset(o Outcome) string {
	switch {
	case o.Detection == nil:
		return "—"
	case o.Reset == nil:
		return "firing"
	}
	return short(*o.Reset)
}

func budget(o Outcome) string {
	if o.BudgetSpent == nil {
		return "—"
	}
	return fmt.Sprintf("%.2g%%", *o.BudgetSpent*100)
}

// short writes a duration to its minute past an hour, or its second below.
func short(d time.Duration) string {
	if d >= time.Hour {
		d = d.Round(time.Minute)
	}
	return dur(d)
}

// Shipped is the key of the strategy burnlab ships: Sloth's rules.
const Shipped = "6-multiwindow"

// WriteMarkdown writes one window table's detection table in Markdown:
// each cell the severity and time measured, the expected in brackets, and
// a last row of false pages in the healthy week; then, for each incident
// the shipped rules ticketed before they paged, the lead in words.
func (t Table) WriteMarkdown(w io.Writer, windows string) error {
	ss := t.Strategies[windows]
	var b strings.Builder
	b.WriteString("| incident | traffic |")
	for _, s := range ss {
		fmt.Fprintf(&b, " %s |", s.Key)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(ss)) + "\n")
	for _, row := range t.rows(windows) {
		fmt.Fprintf(&b, "| %s | %s |", row[0], row[1])
		for _, s := range ss {
			c := t.cell(windows, s.Key, row[0], row[1])
			if row[0] == HealthyName {
				fmt.Fprintf(&b, " %g false pages |", c.FalsePagesPerWeek)
				continue
			}
			fmt.Fprintf(&b, " %s [%s] |", detection(c.Measured), detection(c.Expected))
		}
		b.WriteString("\n")
	}
	sep := "\n"
	for _, row := range t.rows(windows) {
		o := t.cell(windows, Shipped, row[0], row[1]).Measured
		if led, ok := lead(o); ok {
			fmt.Fprintf(&b, "%s- **%s** at %s traffic: the shipped rules open a ticket %s after it began and page %s after, %s later.\n",
				sep, row[0], row[1], short(*o.FirstTicket), short(*o.FirstPage), short(led))
			sep = ""
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
