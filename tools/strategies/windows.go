package strategies

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	alertwindowsv1 "github.com/slok/sloth/pkg/prometheus/alertwindows/v1"
	"go.yaml.in/yaml/v3"
)

// A Pair is one multiwindow alert of a window table: it fires when the
// error ratio over both Long and Short is over Factor times the budget.
// Factor is what Sloth derives from the budget share: BudgetPercent of the
// period's budget spent in Long, so Factor = BudgetPercent/100 × period /
// Long.
type Pair struct {
	Name          string // "page quick", "page slow", "ticket quick", "ticket slow"
	Severity      string // page or ticket
	BudgetPercent float64
	Short, Long   time.Duration
	Factor        float64
}

// Windows is a Sloth window table (an AlertWindows file) with the
// intervals a backtest scrapes and evaluates at.
type Windows struct {
	Name   string
	Period time.Duration
	Pairs  []Pair // page quick, page slow, ticket quick, ticket slow
	// Dir holds the AlertWindows file Sloth reads; empty for Sloth's
	// built-in 30-day table.
	Dir string
	// Scrape and Eval are the backtest's sample and rule intervals.
	Scrape, Eval time.Duration
}

// Shortest is the table's shortest window: no strategy derived from the
// table rates over less, since a window needs several samples to mean
// anything.
func (w Windows) Shortest() time.Duration {
	s := w.Pairs[0].Short
	for _, p := range w.Pairs {
		s = min(s, p.Short)
	}
	return s
}

// Longest is the table's longest window.
func (w Windows) Longest() time.Duration {
	var l time.Duration
	for _, p := range w.Pairs {
		l = max(l, p.Long)
	}
	return l
}

// Production is Sloth's built-in table, the SRE workbook's (Sloth's
// internal/alert/windows/google-30d.yaml; a test holds it to the rules
// Sloth generates with it). It is scraped every minute and evaluated every
// two: a 3-day window is then 4,320 samples a rule, and a detection moves
// by at most two minutes against hours.
func Production() Windows {
	return table("production", "", 30*24*time.Hour, time.Minute, 2*time.Minute, alertwindowsv1.Spec{
		Page: alertwindowsv1.PageWindow{QuickSlowWindow: alertwindowsv1.QuickSlowWindow{
			Quick: window(2, 5*time.Minute, time.Hour),
			Slow:  window(5, 30*time.Minute, 6*time.Hour),
		}},
		Ticket: alertwindowsv1.TicketWindow{QuickSlowWindow: alertwindowsv1.QuickSlowWindow{
			Quick: window(10, 2*time.Hour, 24*time.Hour),
			Slow:  window(10, 6*time.Hour, 72*time.Hour),
		}},
	})
}

func window(pct float64, short, long time.Duration) alertwindowsv1.Window {
	return alertwindowsv1.Window{ErrorBudgetPercent: pct, ShortWindow: model.Duration(short), LongWindow: model.Duration(long)}
}

// LoadWindows reads the one AlertWindows file in dir, as Sloth's
// --slo-period-windows-path does, to be sampled every scrape and
// evaluated every eval.
func LoadWindows(dir string, scrape, eval time.Duration) (Windows, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return Windows{}, err
	}
	yml, _ := filepath.Glob(filepath.Join(dir, "*.yml"))
	files = append(files, yml...)
	if len(files) != 1 {
		return Windows{}, fmt.Errorf("windows %s: want one AlertWindows file (.yaml or .yml), found %d", dir, len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return Windows{}, fmt.Errorf("windows: %w", err)
	}
	var aw alertwindowsv1.AlertWindows
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&aw); err != nil {
		return Windows{}, fmt.Errorf("windows %s: %w", files[0], err)
	}
	if aw.Kind != "AlertWindows" {
		return Windows{}, fmt.Errorf("windows %s: kind %q, want AlertWindows", files[0], aw.Kind)
	}
	name := strings.TrimSuffix(filepath.Base(files[0]), filepath.Ext(files[0]))
	w := table(name, dir, time.Duration(aw.Spec.SLOPeriod), scrape, eval, aw.Spec)
	return w, w.validate()
}

func table(name, dir string, period, scrape, eval time.Duration, s alertwindowsv1.Spec) Windows {
	w := Windows{Name: name, Dir: dir, Period: period, Scrape: scrape, Eval: eval}
	for _, p := range []struct {
		name, sev string
		win       alertwindowsv1.Window
	}{
		{"page quick", "page", s.Page.Quick}, {"page slow", "page", s.Page.Slow},
		{"ticket quick", "ticket", s.Ticket.Quick}, {"ticket slow", "ticket", s.Ticket.Slow},
	} {
		long := time.Duration(p.win.LongWindow)
		pair := Pair{Name: p.name, Severity: p.sev, BudgetPercent: p.win.ErrorBudgetPercent,
			Short: time.Duration(p.win.ShortWindow), Long: long}
		if long > 0 {
			pair.Factor = p.win.ErrorBudgetPercent / 100 * float64(period) / float64(long)
		}
		w.Pairs = append(w.Pairs, pair)
	}
	return w
}

func (w Windows) validate() error {
	if w.Period <= 0 {
		return fmt.Errorf("windows %s: sloPeriod must be positive", w.Name)
	}
	if w.Scrape <= 0 || w.Eval <= 0 {
		return fmt.Errorf("windows %s: scrape and eval intervals must be positive", w.Name)
	}
	for _, p := range w.Pairs {
		switch {
		case p.Short <= 0 || p.Long <= 0:
			return fmt.Errorf("windows %s: %s: both windows must be set", w.Name, p.Name)
		case p.Short > p.Long:
			return fmt.Errorf("windows %s: %s: short window %s is longer than long window %s", w.Name, p.Name, p.Short, p.Long)
		case p.Short < 2*w.Scrape:
			return fmt.Errorf("windows %s: %s: short window %s holds fewer than two samples at a %s scrape", w.Name, p.Name, p.Short, w.Scrape)
		case p.BudgetPercent <= 0 || p.BudgetPercent > 100:
			return fmt.Errorf("windows %s: %s: errorBudgetPercent %g is outside (0, 100]", w.Name, p.Name, p.BudgetPercent)
		}
	}
	return nil
}
