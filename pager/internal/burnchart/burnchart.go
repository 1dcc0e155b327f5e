// Package burnchart draws an incident's burn chart as an inline SVG, like
// Pyrra's per-alert graph: the SLI's burn rate over time for the page's
// short and long windows, the pair's threshold, and the span the page
// fired. The SVG is built in Go, styled by attributes (no <style>, no
// script) and carries no id, so a page may hold several charts. Every
// piece of text is escaped: names and labels may come from a payload.
package burnchart

import (
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Point is one sample: V is the burn rate, in multiples of the rate that
// spends the error budget exactly over the SLO period. NaN means no data at
// T, a gap in the line; negative values are drawn at 0, and +Inf or values
// above MaxRate at the chart's top edge.
type Point struct {
	T time.Time
	V float64
}

// Series is one window's burn rate; Name is its legend, e.g. "2m (short)".
type Series struct {
	Name   string
	Points []Point
}

// Chart is one page's burn chart. Points outside From..To are not drawn.
// However many points come in, at most about two a pixel column are drawn
// (the lowest and highest), so the SVG's size follows Width, not the input.
type Chart struct {
	Short, Long    Series
	Threshold      float64 // the pair's factor, e.g. 6 or 14.4: in [MinThreshold, MaxRate]
	ThresholdLabel string  // e.g. "page over 6x"
	Fired          time.Time
	Resolved       time.Time      // zero while firing
	From, To       time.Time      // the x range
	Width, Height  int            // pixels; 0 means 720 and 240
	Title          string         // the accessible title; default "Burn rate"
	Location       *time.Location // of the time ticks; nil means UTC
}

// MaxRate bounds the y scale: a burn rate cannot exceed 1/(1-objective),
// 1000 for 99.9%, so larger values are errors in the data. MinThreshold
// keeps the tick labels short: no alert pages on a hundredth of the rate.
const (
	MaxRate      = 1e6
	MinThreshold = 0.01
)

const (
	left, right, top, bottom = 44, 12, 26, 22 // margins: tick labels, legend
	colShort, colLong        = "#d9480f", "#1c5fb8"
	colThreshold, colFiring  = "#a3120b", "#e03131"
)

// SVG renders the chart as a complete, standalone <svg> element.
func (c Chart) SVG() (template.HTML, error) {
	if c.Width == 0 {
		c.Width = 720
	}
	if c.Height == 0 {
		c.Height = 240
	}
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	switch {
	case !c.From.Before(c.To):
		return "", fmt.Errorf("burnchart: From (%s) must be before To (%s)", c.From, c.To)
	case c.Width < 320 || c.Width > 8192 || c.Height < 120 || c.Height > 8192:
		return "", fmt.Errorf("burnchart: size %dx%d out of range: width 320..8192, height 120..8192 (0 for the default)", c.Width, c.Height)
	case !(c.Threshold >= MinThreshold && c.Threshold <= MaxRate):
		return "", fmt.Errorf("burnchart: threshold %v must be in [%v, %v]: the pair's factor, e.g. 6", c.Threshold, MinThreshold, MaxRate)
	case !c.Resolved.IsZero() && (c.Fired.IsZero() || c.Resolved.Before(c.Fired)):
		return "", errors.New("burnchart: Resolved needs a Fired at or before it; leave Resolved zero while firing")
	}
	x0, x1, y0, y1 := float64(left), float64(c.Width-right), float64(top), float64(c.Height-bottom)
	span := float64(c.To.Sub(c.From))
	xOf := func(t time.Time) float64 { return x0 + (x1-x0)*float64(t.Sub(c.From))/span }
	ticks, decimals := yTicks(max(c.Threshold, dataMax(c.Short), dataMax(c.Long)))
	yMax := ticks[len(ticks)-1]
	yOf := func(v float64) float64 { return y1 - (y1-y0)*min(max(v, 0), yMax)/yMax }

	var b strings.Builder
	title := cmp.Or(c.Title, "Burn rate")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="system-ui, sans-serif" font-size="11" fill="#1d1d1f">`,
		c.Width, c.Height, c.Width, c.Height, esc(title))
	zone, _ := c.From.In(loc).Zone()
	fmt.Fprintf(&b, "\n<title>%s</title>\n<desc>%s</desc>\n", esc(title), esc(fmt.Sprintf(
		"Burn rate of %s and %s against %s, from %s to %s %s.", name(c.Short, "short window"), name(c.Long, "long window"),
		cmp.Or(c.ThresholdLabel, num(c.Threshold)+"x"), c.From.In(loc).Format(time.DateTime), c.To.In(loc).Format(time.TimeOnly), zone)))
	fmt.Fprintf(&b, `<rect class="plot" x="%s" y="%s" width="%s" height="%s" fill="#fff" stroke="#ccc"/>`+"\n", f(x0), f(y0), f(x1-x0), f(y1-y0))

	// The firing span, clipped to the x range: to the end while firing.
	end := c.Resolved
	if end.IsZero() || end.After(c.To) {
		end = c.To
	}
	if !c.Fired.IsZero() && c.Fired.Before(c.To) && !end.Before(c.From) {
		fx := xOf(later(c.Fired, c.From))
		fmt.Fprintf(&b, `<rect class="firing" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.12"><title>%s</title></rect>`+"\n",
			f(fx), f(y0), f(xOf(end)-fx), f(y1-y0), colFiring, esc(firingText(c, loc)))
	}

	for i, v := range ticks {
		y := f(yOf(v))
		label := "0"
		if i > 0 {
			p := math.Pow10(decimals) // labels 0.3x, not 0.30000000000000004x
			label = num(math.Round(v*p)/p) + "x"
		}
		fmt.Fprintf(&b, `<g class="y-tick"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/><text x="%s" y="%s" dy="4" text-anchor="end">%s</text></g>`+"\n",
			f(x0), y, f(x1), y, f(x0-4), y, esc(label))
	}
	for _, t := range timeTicks(c.From, c.To, loc, int(x1-x0)/90) {
		x := xOf(t)
		lx := min(max(x, 26), float64(c.Width)-26) // HH:MM:SS is about 50 px wide: keep it in view
		fmt.Fprintf(&b, `<g class="x-tick"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#999"/><text x="%s" y="%s" text-anchor="middle">%s</text></g>`+"\n",
			f(x), f(y1), f(x), f(y1+4), f(lx), f(y1+15), esc(t.In(loc).Format(time.TimeOnly)))
	}

	ty := f(yOf(c.Threshold))
	fmt.Fprintf(&b, `<line class="threshold" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n",
		f(x0), ty, f(x1), ty, colThreshold)
	fmt.Fprintf(&b, `<text class="threshold-label" x="%s" y="%s" dy="-4" text-anchor="end" fill="%s">%s</text>`+"\n",
		f(x1-4), ty, colThreshold, esc(cmp.Or(c.ThresholdLabel, num(c.Threshold)+"x")))

	// The long window first, so the thinner, dashed short one stays on top.
	lines := []struct {
		s                  Series
		class, def, colour string
		style, d           string
	}{
		{c.Long, "burn-long", "long window", colLong, `stroke-width="2.5"`, path(c, c.Long, xOf, yOf)},
		{c.Short, "burn-short", "short window", colShort, `stroke-width="1.5" stroke-dasharray="5 3"`, path(c, c.Short, xOf, yOf)},
	}
	for _, l := range lines {
		if l.d != "" {
			fmt.Fprintf(&b, `<path class="%s" d="%s" fill="none" stroke="%s" %s stroke-linejoin="round" stroke-linecap="round"/>`+"\n", l.class, l.d, l.colour, l.style)
		}
	}

	// The legend, above the plot: short, long, then the firing swatch.
	b.WriteString(`<g class="legend">`)
	lx := x0
	for _, l := range slices.Backward(lines) {
		label := name(l.s, l.def)
		if l.d == "" {
			label += " (no data)"
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="10" x2="%s" y2="10" stroke="%s" %s/><text x="%s" y="14">%s</text>`,
			f(lx), f(lx+22), l.colour, l.style, f(lx+27), esc(label))
		lx += 27 + 6.5*float64(len([]rune(label))) + 16
	}
	fmt.Fprintf(&b, `<rect x="%s" y="4" width="14" height="12" fill="%s" fill-opacity="0.12" stroke="%s" stroke-opacity="0.3"/><text x="%s" y="14">firing</text>`,
		f(lx), colFiring, colFiring, f(lx+19))
	fmt.Fprintf(&b, `<text x="%s" y="14" text-anchor="end" fill="#555">times in %s</text></g>`+"\n</svg>", f(x1), esc(zone))
	return template.HTML(b.String()), nil // #nosec G203 -- every text and attribute value above is escaped by esc
}

// path is a series' SVG path data: "M" starts each run of samples between
// gaps, and a lone sample is drawn as a dot ("h0" with round caps).
func path(c Chart, s Series, xOf func(time.Time) float64, yOf func(float64) float64) string {
	var ps [][2]float64 // x, y; y NaN for a gap
	for _, p := range s.Points {
		if !p.T.Before(c.From) && !p.T.After(c.To) {
			ps = append(ps, [2]float64{xOf(p.T), yValue(p.V, yOf)})
		}
	}
	slices.SortStableFunc(ps, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	ps = thin(ps, c.Width-left-right)
	var d strings.Builder
	run := 0
	for i, p := range ps {
		if math.IsNaN(p[1]) {
			run = 0
			continue
		}
		if run == 0 {
			fmt.Fprintf(&d, "M%s %s", f(p[0]), f(p[1]))
		} else {
			fmt.Fprintf(&d, "L%s %s", f(p[0]), f(p[1]))
		}
		run++
		if run == 1 && (i == len(ps)-1 || math.IsNaN(ps[i+1][1])) {
			d.WriteString("h0")
		}
	}
	return d.String()
}

// thin keeps, of more than two points a pixel column, the lowest, the
// highest and the first gap, in time order.
func thin(ps [][2]float64, cols int) [][2]float64 {
	if len(ps) <= 2*cols {
		return ps
	}
	out := make([][2]float64, 0, 3*cols+3)
	for i := 0; i < len(ps); {
		col, lo, hi, gap := int(ps[i][0]), -1, -1, -1
		j := i
		for ; j < len(ps) && int(ps[j][0]) == col; j++ {
			switch y := ps[j][1]; {
			case math.IsNaN(y):
				if gap < 0 {
					gap = j
				}
			case lo < 0:
				lo, hi = j, j
			case y < ps[lo][1]:
				lo = j
			case y > ps[hi][1]:
				hi = j
			}
		}
		keep := slices.Compact(slices.Sorted(slices.Values([]int{lo, hi, gap})))
		for _, k := range keep {
			if k >= 0 {
				out = append(out, ps[k])
			}
		}
		i = j
	}
	return out
}

// yTicks is 0 and three to five equal, nice steps (1, 2, 2.5 or 5 times a
// power of ten) up to the first at or above m plus 10% headroom; decimals
// is how many the step's labels need.
func yTicks(m float64) (ticks []float64, decimals int) {
	m *= 1.1
	e := int(math.Floor(math.Log10(m / 4)))
	step := 0.0
	for _, k := range []float64{1, 2, 2.5, 5, 10} {
		if step = k * math.Pow10(e); step >= m/4 {
			switch decimals = max(0, -e); k {
			case 2.5:
				decimals = max(0, 1-e)
			case 10:
				decimals = max(0, -e-1)
			}
			break
		}
	}
	n := int(math.Ceil(m/step - 1e-9))
	ticks = make([]float64, n+1)
	for i := range ticks {
		ticks[i] = float64(i) * step
	}
	return ticks, decimals
}

// timeTicks are at most n (at least 2) times at a round step, aligned to
// the location's wall clock.
func timeTicks(from, to time.Time, loc *time.Location, n int) []time.Time {
	n = max(n, 2)
	want := to.Sub(from) / time.Duration(n)
	step := (want/(24*time.Hour) + 1) * 24 * time.Hour
	for _, s := range []time.Duration{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200} {
		if s*time.Second >= want {
			step = s * time.Second
			break
		}
	}
	_, off := from.In(loc).Zone()
	sec := int64(step / time.Second)
	first := (from.Unix()+int64(off)+sec-1)/sec*sec - int64(off)
	var ticks []time.Time
	for t := time.Unix(first, 0); !t.After(to); t = t.Add(step) {
		if !t.Before(from) {
			ticks = append(ticks, t)
		}
	}
	return ticks
}

func firingText(c Chart, loc *time.Location) string {
	s := "firing since " + c.Fired.In(loc).Format(time.TimeOnly)
	if !c.Resolved.IsZero() {
		s = "fired " + c.Fired.In(loc).Format(time.TimeOnly) + ", resolved " + c.Resolved.In(loc).Format(time.TimeOnly)
	}
	return s
}

// dataMax is the largest finite burn rate in s, at most MaxRate.
func dataMax(s Series) float64 {
	m := 0.0
	for _, p := range s.Points {
		if p.V <= MaxRate { // false for NaN
			m = max(m, p.V)
		}
	}
	return m
}

func yValue(v float64, yOf func(float64) float64) float64 {
	if math.IsNaN(v) {
		return v
	}
	return yOf(v) // yOf clamps, +Inf included
}

// name is the series' legend, cut to 40 characters so the legend fits.
func name(s Series, def string) string {
	r := []rune(cmp.Or(s.Name, def))
	if len(r) > 40 {
		return string(r[:39]) + "…"
	}
	return string(r)
}

// esc escapes s for XML text and attribute values alike (quotes too), and
// replaces what XML cannot hold, so a hostile name cannot break out.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

func f(v float64) string   { return strconv.FormatFloat(v, 'f', 1, 64) }
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
