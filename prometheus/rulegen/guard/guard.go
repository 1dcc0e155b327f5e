// Package guard adds a minimum-traffic guard to each window pair of the
// burn-rate alerts in a Sloth rule file.
//
// A pair fires when the error ratio over its short and its long window is
// above F times the budget B. When the long window holds fewer than
// 1/(F × B) events, one bad event is already over that line: at a 0.1 %
// budget that is 70 streams for the 14.4x pair and 1,000 for the 1x one.
// At low traffic a single slow stream then pages, which is a false page,
// not evidence of a burn (Pyrra #1925 and Sloth #666 ask for this guard).
// `make strategies` measures it: on the lab's windows at one stream a
// second, the unguarded rules page once in a healthy week.
//
// The guard is one more term per pair: the long window must hold at least
// 1/(F × B) of the SLI's events, so that it takes two bad events or more
// to fire. The events are the SLI's own total query (from the Sloth spec)
// times the window, recorded as slo:sli_events:increase<W>. At the lab's
// 25 streams a second every long window holds 21 to 72 times its minimum,
// so the guard never changes when a real burn pages; it silences only
// windows too empty to tell a burn from one unlucky stream.
package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Record is the recording of the SLI's events over a window: the name
// slo:sli_events:increase<W> and one series per SLO.
const Record = "slo:sli_events:increase"

// GroupPrefix names the recording group written for each SLO.
const GroupPrefix = "slo-sli-events-"

// Term is the guard of one pair, as the alert's expression holds it: the
// SLO's events over the pair's long window against the least that one
// bad event cannot push over the factor. budget is written as the
// expression writes it, so that both compare with the same number.
func Term(id string, long time.Duration, factor float64, budget string) string {
	return fmt.Sprintf("%s%s{sloth_id=%q} >= (1 / (%s * %s))", Record, model.Duration(long), id, num(factor), budget)
}

// MinEvents is the least number of events a long window must hold for a
// pair of factor to fire under a budget: below it, one bad event alone is
// over the factor.
func MinEvents(factor, budget float64) float64 { return 1 / (factor * budget) }

func num(f float64) string { return fmt.Sprintf("%g", f) }

// Events is the expression of an SLI's events over a window: its total
// query (a per-second rate, Sloth's {{.window}} in it) times the window.
func Events(totalQuery string, window time.Duration) string {
	q := strings.TrimSpace(strings.ReplaceAll(totalQuery, "{{.window}}", model.Duration(window).String()))
	return fmt.Sprintf("(%s) * %g", q, window.Seconds())
}

// term is one window of Sloth's alert expression, as prometheus/rulegen/burnfacts
// reads it; only the window, the sloth_id and the factor matter here.
var term = regexp.MustCompile(`^(\s*)max\(slo:sli_error:ratio_rate([0-9a-z]+)\{[^}]*sloth_id="([^"]+)"[^}]*\} > \(([0-9.e+-]+) \* ([0-9.e+-]+)\)\) without \(sloth_window\)$`)

// recording is a recording rule, its keys in Sloth's order.
type recording struct {
	Record string            `yaml:"record"`
	Expr   string            `yaml:"expr"`
	Labels map[string]string `yaml:"labels"`
}

type spec struct {
	Service string `yaml:"service"`
	SLOs    []struct {
		Name string `yaml:"name"`
		SLI  struct {
			Events *struct {
				TotalQuery string `yaml:"total_query"`
			} `yaml:"events"`
		} `yaml:"sli"`
	} `yaml:"slos"`
}

// Append returns the Sloth rule file with a guard term after the long
// window of each pair of each alert, and a group of event recordings per
// SLO after Sloth's groups. Every other byte is kept, so a regeneration
// compares with the committed file. It runs before prometheus/rulegen/burnfacts, which
// reads the guards to say which pair fired.
//
// The spec may hold several services, one YAML document each, as Sloth
// reads them.
func Append(sloth, slothSpec []byte) ([]byte, error) {
	totals := map[string]string{} // sloth_id → total query
	services := map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(slothSpec))
	for {
		var sp spec
		if err := dec.Decode(&sp); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("guard: reading the Sloth spec: %w", err)
		}
		for _, o := range sp.SLOs {
			if o.SLI.Events == nil || strings.TrimSpace(o.SLI.Events.TotalQuery) == "" {
				return nil, fmt.Errorf("guard: SLO %s has no events SLI with a total_query, so its events cannot be counted", o.Name)
			}
			totals[sp.Service+"-"+o.Name] = o.SLI.Events.TotalQuery
			services[sp.Service+"-"+o.Name] = sp.Service
		}
	}
	if bytes.Contains(sloth, []byte(Record)) {
		return nil, errors.New("guard: the rule file is guarded already: regenerate it with Sloth first")
	}
	var ids []string
	windows := map[string][]time.Duration{}
	var out bytes.Buffer
	lines := strings.SplitAfter(string(sloth), "\n")
	// Sloth writes each pair as its short window's term, "and", its long
	// window's term: every second term ends a pair.
	n, first := 0, ""
	for _, line := range lines {
		out.WriteString(line)
		m := term.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		if n++; n%2 == 1 {
			first = m[3]
			continue
		}
		indent, id := m[1], m[3]
		if id != first {
			return nil, fmt.Errorf("guard: a pair's windows are of two SLOs, %s and %s", first, id)
		}
		long, err := model.ParseDuration(m[2])
		if err != nil {
			return nil, fmt.Errorf("guard: window %s: %w", m[2], err)
		}
		factor, err := strconv.ParseFloat(m[4], 64)
		if err != nil || !(factor > 0) {
			return nil, fmt.Errorf("guard: factor %q is not a number above 0", m[4])
		}
		if _, ok := totals[id]; !ok {
			return nil, fmt.Errorf("guard: alert on SLO %s, which the Sloth spec lacks", id)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
		if !slices.Contains(windows[id], time.Duration(long)) {
			windows[id] = append(windows[id], time.Duration(long))
		}
		fmt.Fprintf(&out, "%sand on(sloth_id)\n%s%s\n", indent, indent, Term(id, time.Duration(long), factor, m[5]))
	}
	if n == 0 || n%2 != 0 {
		return nil, fmt.Errorf("guard: %d window terms, want pairs of Sloth's max(slo:sli_error:ratio_rate<W>{…} > (F * B)) without (sloth_window)", n)
	}
	if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	out.WriteString("# Appended by prometheus/rulegen/cmd/guard-rules (make rules), not by Sloth: each SLO's\n" +
		"# events over its pairs' long windows, which the alerts' minimum-traffic\n" +
		"# guards read (prometheus/rulegen/guard explains them). DO NOT EDIT.\n")
	for _, id := range ids {
		service := services[id]
		name := strings.TrimPrefix(id, service+"-")
		fmt.Fprintf(&out, "- name: %s%s\n  rules:\n", GroupPrefix, id)
		ws := windows[id]
		slices.Sort(ws)
		for _, w := range ws {
			rule := recording{Record: Record + model.Duration(w).String(), Expr: Events(totals[id], w) + "\n",
				Labels: map[string]string{"sloth_id": id, "sloth_service": service, "sloth_slo": name, "sloth_window": model.Duration(w).String()}}
			var e bytes.Buffer
			enc := yaml.NewEncoder(&e)
			enc.SetIndent(2)
			if err := enc.Encode([]recording{rule}); err != nil {
				return nil, fmt.Errorf("guard: %w", err)
			}
			out.WriteString("  " + strings.ReplaceAll(strings.TrimSuffix(e.String(), "\n"), "\n", "\n  ") + "\n")
		}
	}
	var check struct{ Groups []yaml.Node }
	if err := yaml.Unmarshal(out.Bytes(), &check); err != nil {
		return nil, fmt.Errorf("guard: the guarded file does not parse: %w", err)
	}
	return out.Bytes(), nil
}
