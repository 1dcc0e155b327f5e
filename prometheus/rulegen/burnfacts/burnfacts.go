// Package burnfacts adds to each alert of a Sloth rule file the facts a
// person paged needs at firing and Sloth does not write: the burn rate of
// each window of the pair that fired next to the pair's threshold, and the
// error budget spent, left, and when it runs out at that burn.
//
// Terms. An SLO's error budget B is the share of events it may fail (0.1 %
// for 99.9 %). The burn rate over a window W is the error ratio over W
// divided by B: 1 spends the budget exactly over the SLO period P, 10 in a
// tenth of it. A Sloth page alert is an OR of window pairs (a short and a
// long window and a factor F): it fires through a pair when the burn over
// both windows is above F.
//
// Why here and not in the Sloth spec: the spec is one for the lab's and
// the production windows, and a Prometheus template can read neither the
// rule's expression nor the windows it checks. So this step reads each
// alert's expression, which Sloth writes in one fixed shape, and writes
// three annotations whose templates Prometheus expands at every
// evaluation; Alertmanager's first notification carries those of the
// evaluation that fired, so the page, the API and any e-mail or chat
// message read the figures of the moment it fired:
//
//   - burn_windows: the pairs, fixed text ("30s/1m over 14.4x; 2m/4m over 6x"),
//     which the pager reads (shared/slo.ParsePairs) to chart and query them;
//   - burn_rate: each window of the pair that fired and its threshold
//     ("2m 9.8x and 4m 8.1x, over 6x"), or every pair's when none is over;
//   - budget: spent = the bad events of the period so far ÷ those the
//     budget allows in all of P (shared/slo.SpentExpr; Sloth's
//     slo:period_burn_rate:ratio is the mean over the history instead,
//     which reads ten budgets gone after minutes at 10x), the history it
//     rests on while shorter than P (shared/slo.HistoryExpr), left =
//     1 − spent, and at the burn over the long window of the pair that
//     fired (b), left × P / b until it is gone.
//
// The annotations go first in each alert's annotations; every other byte
// of Sloth's file is kept, so a regeneration compares with the committed
// file.
package burnfacts

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"burnlab/prometheus/rulegen/guard"
	"burnlab/shared/slo"
)

// term is one window of Sloth's alert expression:
// max(slo:sli_error:ratio_rate<W>{<matchers>} > (<factor> * <budget>)) without (sloth_window)
var term = regexp.MustCompile(`max\(slo:sli_error:ratio_rate([0-9a-z]+)\{([^}]*)\} > \(([0-9.e+-]+) \* ([0-9.e+-]+)\)\) without \(sloth_window\)`)

// rest is what an expression may hold besides its terms: Sloth joins a
// pair's two terms with "and" in parentheses, and the pairs with "or".
var rest = regexp.MustCompile(`^[\s()]*(?:and|or|[\s()])*$`)

var slothID = regexp.MustCompile(`sloth_id="([^"]+)"`)

// guarded is a pair's minimum-traffic guard, which prometheus/rulegen/guard writes
// after the pair's long window:
// and on(sloth_id) slo:sli_events:increase<W>{sloth_id="<id>"} >= (1 / (<factor> * <budget>))
var guarded = regexp.MustCompile(`and on\(sloth_id\)\s+` + regexp.QuoteMeta(guard.Record) + `([0-9a-z]+)\{sloth_id="([^"]+)"\} >= \(1 / \(([0-9.e+-]+) \* ([0-9.e+-]+)\)\)`)

// An Alert is what this package reads of one Sloth alert.
type Alert struct {
	Name, ID string
	Pairs    []slo.Pair
	// Budget is the error budget as the expression writes it (Sloth's
	// 1 − objective in float64), so the burn matches the alert's own
	// comparison.
	Budget string
	// Guarded says each pair has prometheus/rulegen/guard's minimum-traffic guard: it
	// fires only when its long window holds guard.MinEvents events.
	Guarded bool
}

// Parse reads a Sloth alert's expression. Anything that is not Sloth's
// shape is an error: an annotation computed from a misread expression
// would say the wrong burn.
func Parse(name, expr string) (Alert, error) {
	a := Alert{Name: name}
	ms := term.FindAllStringSubmatch(expr, -1)
	if len(ms) == 0 || len(ms)%2 != 0 {
		return a, fmt.Errorf("alert %s: %d window terms, want pairs of Sloth's max(slo:sli_error:ratio_rate<W>{…} > (F * B)) without (sloth_window)", name, len(ms))
	}
	gs := guarded.FindAllStringSubmatch(expr, -1)
	if len(gs) > 0 && len(gs) != len(ms)/2 {
		return a, fmt.Errorf("alert %s: %d guards for %d window pairs, want one each or none", name, len(gs), len(ms)/2)
	}
	a.Guarded = len(gs) > 0
	if left := term.ReplaceAllString(guarded.ReplaceAllString(expr, ""), ""); !rest.MatchString(left) {
		return a, fmt.Errorf("alert %s: the expression holds more than Sloth's window pairs: %.80q", name, strings.TrimSpace(left))
	}
	for i := 0; i < len(ms); i += 2 {
		s, l := ms[i], ms[i+1]
		id := slothID.FindStringSubmatch(s[2])
		if id == nil || !strings.Contains(l[2], id[0]) {
			return a, fmt.Errorf("alert %s: window terms without one sloth_id", name)
		}
		if a.ID == "" {
			a.ID, a.Budget = id[1], s[4]
		}
		if id[1] != a.ID || s[4] != a.Budget || l[4] != a.Budget || s[3] != l[3] {
			return a, fmt.Errorf("alert %s: a pair's terms differ in SLO, budget or factor", name)
		}
		short, err1 := model.ParseDuration(s[1])
		long, err2 := model.ParseDuration(l[1])
		factor, err3 := strconv.ParseFloat(s[3], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return a, fmt.Errorf("alert %s: %w", name, err)
		}
		if a.Guarded {
			if g := gs[i/2]; g[1] != l[1] || g[2] != a.ID || g[3] != l[3] || g[4] != a.Budget {
				return a, fmt.Errorf("alert %s: the guard of pair %s/%s is not over its long window, SLO, factor and budget", name, s[1], l[1])
			}
		}
		a.Pairs = append(a.Pairs, slo.Pair{Short: time.Duration(short), Long: time.Duration(long), Factor: factor})
	}
	return a, nil
}

// Annotations are the three annotations of a, for an SLO period of
// period.
func (a Alert) Annotations(period time.Duration) map[string]string {
	return map[string]string{
		slo.PairsAnnotation: slo.FormatPairs(a.Pairs),
		"burn_rate":         a.burnRate(),
		"budget":            a.budget(period),
	}
}

// float writes a number as a template's float constant: "6.0", never "6",
// which text/template would take for an int and refuse to compare with a
// sample's value.
func float(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

func window(d time.Duration) string { return model.Duration(d).String() }

// burns is the template that sets $s<i> and $l<i> to each pair's burn over
// its short and long window: -1 where Prometheus has no value.
func (a Alert) burns() string {
	var b strings.Builder
	for i, p := range a.Pairs {
		for _, w := range []struct {
			v string
			d time.Duration
		}{{fmt.Sprintf("$s%d", i), p.Short}, {fmt.Sprintf("$l%d", i), p.Long}} {
			fmt.Fprintf(&b, "{{ %s := -1.0 }}{{ with query `slo:sli_error:ratio_rate%s{sloth_id=%q} / %s` }}{{ %s = . | first | value }}{{ end }}",
				w.v, window(w.d), a.ID, a.Budget, w.v)
		}
		if a.Guarded {
			fmt.Fprintf(&b, "{{ $n%d := -1.0 }}{{ with query `%s%s{sloth_id=%q}` }}{{ $n%d = . | first | value }}{{ end }}",
				i, guard.Record, window(p.Long), a.ID, i)
		}
	}
	return b.String()
}

// fired is the condition that pair i fired through: both burns over the
// factor and, when guarded, the long window holding its least events.
func (a Alert) fired(i int, p slo.Pair) string {
	cond := fmt.Sprintf("and (gt $s%d %s) (gt $l%d %s)", i, float(p.Factor), i, float(p.Factor))
	if a.Guarded {
		// The budget as the expression writes it, so the template's
		// least is the very float64 Prometheus compares with.
		b, _ := strconv.ParseFloat(a.Budget, 64)
		cond += fmt.Sprintf(" (ge $n%d %s)", i, float(guard.MinEvents(p.Factor, b)))
	}
	return cond
}

func show(v string) string {
	return fmt.Sprintf(`{{ if lt %s 0.0 }}n/a{{ else }}{{ printf "%%.1f" %s }}x{{ end }}`, v, v)
}

func (a Alert) pairWords(i int, p slo.Pair) string {
	return fmt.Sprintf("%s %s and %s %s", window(p.Short), show(fmt.Sprintf("$s%d", i)), window(p.Long), show(fmt.Sprintf("$l%d", i)))
}

func (a Alert) burnRate() string {
	var b strings.Builder
	b.WriteString(a.burns())
	var all []string
	for i, p := range a.Pairs {
		verb := "else if"
		if i == 0 {
			verb = "if"
		}
		fmt.Fprintf(&b, "{{ %s %s }}%s, over %sx", verb, a.fired(i, p), a.pairWords(i, p), strconv.FormatFloat(p.Factor, 'f', -1, 64))
		all = append(all, fmt.Sprintf("%s (%sx)", a.pairWords(i, p), strconv.FormatFloat(p.Factor, 'f', -1, 64)))
	}
	fmt.Fprintf(&b, "{{ else }}no pair over its threshold: %s{{ end }}", strings.Join(all, "; "))
	return b.String()
}

func (a Alert) budget(period time.Duration) string {
	var b strings.Builder
	b.WriteString(a.burns())
	w := slo.Shortest(a.Pairs)
	spent := slo.SpentExpr(a.ID, w, period)
	for _, q := range []struct{ v, expr string }{
		{"$spent", "100 * " + spent},
		{"$left", "100 - 100 * " + spent},
		{"$history", slo.HistoryExpr(a.ID, w, period)},
	} {
		fmt.Fprintf(&b, "{{ %s := -1000.0 }}{{ with query `%s` }}{{ %s = . | first | value }}{{ end }}", q.v, q.expr, q.v)
	}
	// b is the burn over the long window of the pair that fired, or of
	// the slowest pair when none did.
	last := len(a.Pairs) - 1
	fmt.Fprintf(&b, "{{ $w := %q }}{{ $b := $l%d }}", window(a.Pairs[last].Long), last)
	for i, p := range a.Pairs[:last] {
		fmt.Fprintf(&b, "{{ if %s }}{{ $w = %q }}{{ $b = $l%d }}{{ end }}", a.fired(i, p), window(p.Long), i)
	}
	// left × P / b, in PromQL: a template has no arithmetic.
	lasts := fmt.Sprintf("(1 - %s) * %d / %%f", spent, int64(period.Seconds()))
	fmt.Fprintf(&b, "{{ if lt $spent -999.0 }}no budget figures in Prometheus yet{{ else }}"+
		`{{ printf "%%.1f" $spent }}%% of the %s budget spent`+
		`{{ if and (ge $history 0.0) (lt $history %d.0) }} over the last {{ humanizeDuration $history }}{{ end }}, {{ printf "%%.1f" $left }}%% left`+
		"{{ if le $left 0.0 }}: none left{{ else if gt $b 0.0 }}; at the %s burn ({{ printf \"%%.1f\" $b }}x) it lasts "+
		"{{ with printf `%s` $b | query }}{{ . | first | value | humanizeDuration }}{{ end }}"+
		"{{ else }}; no burn over the {{ $w }} window{{ end }}{{ end }}", window(period), int64(period.Seconds()), "{{ $w }}", lasts)
	return b.String()
}

// Annotate returns the Sloth rule file with the annotations on each of its
// alerts, inserted first under the alert's annotations; every other line
// is kept as Sloth wrote it. The SLO period is read from Sloth's
// slo:time_period:days recording.
func Annotate(sloth []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(sloth, &doc); err != nil {
		return nil, fmt.Errorf("burnfacts: reading the rule file: %w", err)
	}
	var groups *yaml.Node
	if len(doc.Content) == 1 {
		groups = field(doc.Content[0], "groups")
	}
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return nil, errors.New("burnfacts: the rule file has no list of rule groups")
	}
	type insert struct {
		after  int // line number (1-based) of the annotations key
		indent int
		text   map[string]string
	}
	var inserts []insert
	var period time.Duration
	type rule struct {
		alert, record, expr *yaml.Node
		annotations         *yaml.Node // the key
		values              *yaml.Node
	}
	var rules []rule
	for _, g := range groups.Content {
		rs := field(g, "rules")
		if rs == nil {
			continue
		}
		for _, r := range rs.Content {
			var x rule
			x.alert, x.record, x.expr = field(r, "alert"), field(r, "record"), field(r, "expr")
			for i := 0; i+1 < len(r.Content); i += 2 {
				if r.Content[i].Value == "annotations" {
					x.annotations, x.values = r.Content[i], r.Content[i+1]
				}
			}
			rules = append(rules, x)
		}
	}
	for _, r := range rules {
		if r.record != nil && r.record.Value == "slo:time_period:days" && r.expr != nil {
			days, ok := strings.CutPrefix(r.expr.Value, "vector(")
			d, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(days), ")"), 64)
			if !ok || err != nil || !(d > 0) {
				return nil, fmt.Errorf("burnfacts: slo:time_period:days is %.40q, want vector(<days>)", r.expr.Value)
			}
			period = (time.Duration(d * float64(24*time.Hour))).Round(time.Second)
		}
	}
	if period <= 0 {
		return nil, errors.New("burnfacts: no slo:time_period:days recording: is this Sloth's rule file?")
	}
	for _, r := range rules {
		if r.alert == nil {
			continue
		}
		if r.expr == nil || r.annotations == nil || r.values.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("burnfacts: alert %s has no expr or annotations", r.alert.Value)
		}
		for _, k := range []string{slo.PairsAnnotation, "burn_rate", "budget"} {
			if field(r.values, k) != nil {
				return nil, fmt.Errorf("burnfacts: alert %s has a %s annotation already: regenerate the file with Sloth first, and keep %s out of the Sloth spec", r.alert.Value, k, k)
			}
		}
		a, err := Parse(r.alert.Value, r.expr.Value)
		if err != nil {
			return nil, fmt.Errorf("burnfacts: %w", err)
		}
		inserts = append(inserts, insert{after: r.annotations.Line, indent: r.annotations.Column - 1 + 2, text: a.Annotations(period)})
	}
	if len(inserts) == 0 {
		return nil, errors.New("burnfacts: the rule file has no alert")
	}
	lines := strings.SplitAfter(string(sloth), "\n")
	var out bytes.Buffer
	for i, line := range lines {
		out.WriteString(line)
		for _, in := range inserts {
			if in.after != i+1 {
				continue
			}
			keys := slices.Sorted(maps.Keys(in.text))
			for _, k := range keys {
				var e bytes.Buffer
				enc := yaml.NewEncoder(&e)
				enc.SetIndent(2)
				if err := enc.Encode(map[string]string{k: in.text[k]}); err != nil {
					return nil, fmt.Errorf("burnfacts: %w", err)
				}
				pad := strings.Repeat(" ", in.indent)
				out.WriteString(pad + strings.ReplaceAll(strings.TrimSuffix(e.String(), "\n"), "\n", "\n"+pad) + "\n")
			}
		}
	}
	// The result must still read as the same rule groups, with the
	// annotations in.
	var check yaml.Node
	if err := yaml.Unmarshal(out.Bytes(), &check); err != nil {
		return nil, fmt.Errorf("burnfacts: the annotated file does not parse: %w", err)
	}
	return out.Bytes(), nil
}

// field is the value of key in a mapping node, or nil.
func field(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
