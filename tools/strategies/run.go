package strategies

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"burnlab/shared/scenario"
)

// Config is one experiment: a spec, the window tables, the traffic levels
// and which incidents to run.
type Config struct {
	Spec      Spec
	Windows   []Windows
	Traffic   []Traffic
	Incidents []string // by name; empty for all
	Sloth     string   // the Sloth CLI
	Workers   int
	Seed      uint64
}

// A Cell is one strategy's outcome for one incident at one traffic level
// under one window table, measured and expected.
type Cell struct {
	Windows, Strategy, Incident, Traffic string
	Measured, Expected                   Outcome
	// FalsePagesPerWeek is the strategy's pages in the healthy week at
	// this traffic (the same for every incident of the row's traffic).
	FalsePagesPerWeek float64
}

// A Table is every cell of an experiment, with the strategies and
// incidents that made it and each backtest's history, for the pictures.
type Table struct {
	Cells      []Cell
	Strategies map[string][]Strategy // by window table
	Incidents  map[string][]Incident
	Histories  map[[3]string]History // window table, incident, traffic
}

// Run backtests every strategy on every incident at every traffic level,
// under each window table. Random traffic draws its bad streams at random,
// as a real upstream sends them; the lab's traffic spreads them exactly,
// as the lab's upstream does, so its live runs can be compared.
func Run(ctx context.Context, cfg Config) (Table, error) {
	t := Table{Strategies: map[string][]Strategy{}, Incidents: map[string][]Incident{}, Histories: map[[3]string]History{}}
	budgets := map[string]float64{}
	for _, o := range cfg.Spec.SLOs {
		budgets[o.Name] = o.Budget
	}
	type job struct {
		Case
		ss    []Strategy
		key   [3]string
		hist  History
		err   error
		alias *job // the same series ran as another incident
	}
	var jobs []*job
	for _, w := range cfg.Windows {
		ins, err := Incidents(w, budgets)
		if err != nil {
			return t, err
		}
		for _, name := range cfg.Incidents {
			if !slices.ContainsFunc(ins, func(in Incident) bool { return in.Name == name }) {
				var names []string
				for _, in := range ins {
					names = append(names, in.Name)
				}
				return t, fmt.Errorf("no incident %q: want some of %s", name, strings.Join(names, ", "))
			}
		}
		if len(cfg.Incidents) > 0 {
			ins = slices.DeleteFunc(ins, func(in Incident) bool { return !slices.Contains(cfg.Incidents, in.Name) && in.Name != HealthyName })
		}
		t.Incidents[w.Name] = ins
		bySLO := map[string][]Strategy{}
		for _, in := range ins {
			if _, ok := bySLO[in.SLO]; ok {
				continue
			}
			o, err := cfg.Spec.SLO(in.SLO)
			if err != nil {
				return t, err
			}
			ss, err := All(ctx, cfg.Sloth, cfg.Spec, o, w)
			if err != nil {
				return t, err
			}
			bySLO[in.SLO] = ss
			if in.SLO == scenario.StreamLatency {
				t.Strategies[w.Name] = ss
			}
		}
		for _, tr := range cfg.Traffic {
			for _, in := range ins {
				o, _ := cfg.Spec.SLO(in.SLO)
				j := &job{Case: Case{Windows: w, SLO: o, Incident: in, Traffic: tr}, ss: bySLO[in.SLO], key: [3]string{w.Name, in.Name, tr.Name}}
				for _, k := range jobs {
					if k.alias == nil && k.Windows.Name == w.Name && k.Traffic == tr && sameFault(k.Incident, in) {
						j.alias = k
					}
				}
				jobs = append(jobs, j)
			}
		}
	}
	var wg sync.WaitGroup
	work := make(chan *job)
	for range max(1, cfg.Workers) {
		wg.Go(func() {
			for j := range work {
				j.hist, j.err = Backtest(ctx, j.Case, j.ss, cfg.Seed)
			}
		})
	}
	for _, j := range jobs {
		if j.alias == nil {
			work <- j
		}
	}
	close(work)
	wg.Wait()
	for _, j := range jobs {
		if j.alias != nil {
			j.hist, j.err = j.alias.hist, j.alias.err
		}
		if j.err != nil {
			return t, fmt.Errorf("%s, %s, %s: %w", j.Windows.Name, j.Incident.Name, j.Traffic.Name, j.err)
		}
		t.Histories[j.key] = j.hist
	}
	for _, j := range jobs {
		healthy := t.Histories[[3]string{j.Windows.Name, HealthyName, j.Traffic.Name}]
		for _, s := range j.ss {
			c := Cell{Windows: j.Windows.Name, Strategy: s.Key, Incident: j.Incident.Name, Traffic: j.Traffic.Name}
			c.FalsePagesPerWeek = float64(pages(healthy.Spans[s.Key]))
			spent := func(a, b time.Duration) float64 {
				return j.hist.Spent(a, b, j.Traffic.Rate, j.SLO.Budget, j.Windows.Period)
			}
			c.Measured = outcome(j.hist.Spans[s.Key], j.hist.Start, j.hist.Start+j.Incident.Duration, spent)
			c.Expected = Expect(s, j.Case, j.hist.Start, j.hist.Planned, j.Windows.Scrape/5)
			if j.Incident.Healthy {
				c.Measured, c.Expected = Outcome{Detected: detectedIn(healthy.Spans[s.Key])}, Outcome{Detected: "nothing"}
			}
			t.Cells = append(t.Cells, c)
		}
	}
	return t, nil
}

func sameFault(a, b Incident) bool {
	return a.SLO == b.SLO && a.Duration == b.Duration && a.Healthy == b.Healthy && slices.Equal(a.Phases, b.Phases)
}

func pages(spans []Span) int {
	n := 0
	for _, s := range spans {
		if s.Severity == scenario.Page {
			n++
		}
	}
	return n
}

func detectedIn(spans []Span) string {
	if pages(spans) > 0 {
		return scenario.Page
	}
	if len(spans) > 0 {
		return scenario.Ticket
	}
	return "nothing"
}
