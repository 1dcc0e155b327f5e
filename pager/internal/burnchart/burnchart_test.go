package burnchart

import (
	"cmp"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

// series is a point every 15 s from t0, one for each value.
func series(name string, vs ...float64) Series {
	s := Series{Name: name}
	for i, v := range vs {
		s.Points = append(s.Points, Point{T: t0.Add(time.Duration(i) * 15 * time.Second), V: v})
	}
	return s
}

func example() Chart {
	return Chart{
		Short:          series("2m (short)", 0.5, 1, 3, 9, 12, 11, 8, 4, 2, 1, 0.5, 0.2),
		Long:           series("4m (long)", 0.5, 0.7, 1.5, 4, 7, 9, 8.5, 6, 4, 2.5, 1.5, 1),
		Threshold:      6,
		ThresholdLabel: "page over 6x",
		Fired:          t0.Add(75 * time.Second),
		Resolved:       t0.Add(135 * time.Second),
		From:           t0,
		To:             t0.Add(165 * time.Second),
		Title:          "LLMGatewayAvailabilityBurn: burn rate",
	}
}

func render(t *testing.T, c Chart) string {
	t.Helper()
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	return string(svg)
}

// elem is one element of the SVG, as the XML decoder read it.
type elem struct {
	name   string
	attr   map[string]string
	text   string // character data directly inside it
	depth  int
	parent *elem
}

// parse decodes the whole document, failing the test if it is not XML.
func parse(t *testing.T, svg string) []*elem {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var all, stack []*elem
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &elem{name: tok.Name.Local, attr: map[string]string{}, depth: len(stack)}
			if len(stack) > 0 {
				e.parent = stack[len(stack)-1]
			}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			if e.name == "svg" && tok.Name.Space != "http://www.w3.org/2000/svg" {
				t.Errorf("svg in namespace %q: a browser shows a standalone file only with xmlns", tok.Name.Space)
			}
			all, stack = append(all, e), append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			}
		}
	}
	if len(all) == 0 || all[0].name != "svg" {
		t.Fatalf("root is not <svg>:\n%s", svg)
	}
	return all
}

func find(es []*elem, class string) []*elem {
	var out []*elem
	for _, e := range es {
		if e.attr["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

func one(t *testing.T, es []*elem, class string) *elem {
	t.Helper()
	f := find(es, class)
	if len(f) != 1 {
		t.Fatalf("%d elements of class %q, want 1", len(f), class)
	}
	return f[0]
}

func attr(t *testing.T, e *elem, attr string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attr[attr], 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.name, attr, e.attr[attr], err)
	}
	return v
}

func near(a, b float64) bool { return math.Abs(a-b) <= 0.11 } // coordinates have one decimal

func TestSVGParsesAsXML(t *testing.T) {
	es := parse(t, render(t, example()))
	root := es[0]
	if root.attr["role"] != "img" || root.attr["aria-label"] != "LLMGatewayAvailabilityBurn: burn rate" || root.attr["viewBox"] != "0 0 720 240" {
		t.Errorf("root attributes %v", root.attr)
	}
	if es[1].name != "title" || es[1].depth != 1 || es[1].text != "LLMGatewayAvailabilityBurn: burn rate" {
		t.Errorf("first child %+v, want the <title>", es[1])
	}
	for _, class := range []string{"burn-short", "burn-long", "threshold", "firing", "plot"} {
		one(t, es, class)
	}
	for _, e := range es {
		if e.name == "style" || e.name == "script" || e.attr["id"] != "" {
			t.Errorf("<%s id=%q>: no style, script or id", e.name, e.attr["id"])
		}
	}
	if got := strings.Join(texts(es, "legend"), "|"); got != "2m (short)|4m (long)|firing|times in UTC" {
		t.Errorf("legend %q", got)
	}
	short, long := one(t, es, "burn-short"), one(t, es, "burn-long")
	if short.attr["stroke-dasharray"] == "" || long.attr["stroke-dasharray"] != "" || short.attr["stroke"] == long.attr["stroke"] {
		t.Errorf("short %v and long %v must differ by dashes and colour", short.attr, long.attr)
	}
}

func TestDeterministic(t *testing.T) {
	a, b := render(t, example()), render(t, example())
	if a != b {
		t.Error("two renderings of one chart differ")
	}
}

// texts are the texts of the elements of class parent.
func texts(es []*elem, parent string) []string {
	var out []string
	for _, e := range es {
		if e.name == "text" && e.parent != nil && e.parent.attr["class"] == parent {
			out = append(out, e.text)
		}
	}
	return out
}

// yScale is the y axis the ticks show: pixel y of value 0, pixels per 1x.
func yScale(t *testing.T, es []*elem) (zero, perX float64, top float64) {
	t.Helper()
	var vs, ys []float64
	for _, g := range es {
		if g.attr["class"] != "y-tick" {
			continue
		}
		i := slices.Index(es, g)
		line, text := es[i+1], es[i+2]
		v, err := strconv.ParseFloat(strings.TrimSuffix(text.text, "x"), 64)
		if err != nil {
			t.Fatalf("y tick label %q: %v", text.text, err)
		}
		vs, ys = append(vs, v), append(ys, attr(t, line, "y1"))
	}
	if len(vs) < 3 || vs[0] != 0 {
		t.Fatalf("y ticks %v: want 0 and at least two more", vs)
	}
	n := len(vs) - 1
	return ys[0], (ys[0] - ys[n]) / vs[n], vs[n]
}

func TestThresholdMatchesScale(t *testing.T) {
	for _, th := range []float64{6, 14.4, 1, 3, 0.5, 1000} {
		c := example()
		c.Threshold = th
		es := parse(t, render(t, c))
		zero, perX, top := yScale(t, es)
		line := one(t, es, "threshold")
		y := attr(t, line, "y1")
		if y != attr(t, line, "y2") || !near(y, zero-th*perX) {
			t.Errorf("threshold %v: line y %v..%v, the ticks put it at %v", th, y, attr(t, line, "y2"), zero-th*perX)
		}
		if m := max(th, 12); top < m*1.1 || top > m*3 {
			t.Errorf("threshold %v: top tick %v, want headroom over %v but not much more", th, top, m)
		}
	}
}

func TestYTicks(t *testing.T) {
	for _, tc := range []struct {
		max  float64
		want string
	}{
		{6, "0 2x 4x 6x 8x"},
		{12, "0 5x 10x 15x"},
		{14.4, "0 5x 10x 15x 20x"},
		{20, "0 10x 20x 30x"},
		{36, "0 10x 20x 30x 40x"},
		{1, "0 0.5x 1x 1.5x"},
		{0.01, "0 0.005x 0.01x 0.015x"},
		{0.2, "0 0.1x 0.2x 0.3x"},
		{1e6, "0 500000x 1000000x 1500000x"},
	} {
		c := example()
		c.Short, c.Long, c.Threshold = Series{}, Series{}, tc.max
		if got := strings.Join(texts(parse(t, render(t, c)), "y-tick"), " "); got != tc.want {
			t.Errorf("max %v: ticks %q, want %q", tc.max, got, tc.want)
		}
	}
}

func TestFiringBandMatchesFiredResolved(t *testing.T) {
	c := example()
	plotAndBand := func(c Chart) (x0, w, bx, bw float64, ok bool) {
		es := parse(t, render(t, c))
		p := one(t, es, "plot")
		b := find(es, "firing")
		if len(b) == 0 {
			return attr(t, p, "x"), attr(t, p, "width"), 0, 0, false
		}
		return attr(t, p, "x"), attr(t, p, "width"), attr(t, b[0], "x"), attr(t, b[0], "width"), true
	}
	at := func(x0, w float64, tm time.Time) float64 {
		return x0 + w*float64(tm.Sub(c.From))/float64(c.To.Sub(c.From))
	}
	x0, w, bx, bw, _ := plotAndBand(c)
	if !near(bx, at(x0, w, c.Fired)) || !near(bx+bw, at(x0, w, c.Resolved)) {
		t.Errorf("band %v..%v, want Fired..Resolved %v..%v", bx, bx+bw, at(x0, w, c.Fired), at(x0, w, c.Resolved))
	}

	firing := c
	firing.Resolved = time.Time{}
	_, _, bx, bw, _ = plotAndBand(firing)
	if !near(bx, at(x0, w, c.Fired)) || !near(bx+bw, x0+w) {
		t.Errorf("still firing: band %v..%v, want to the end %v", bx, bx+bw, x0+w)
	}

	early := c
	early.Fired, early.Resolved = c.From.Add(-time.Hour), c.To.Add(time.Hour)
	if _, _, bx, bw, _ = plotAndBand(early); !near(bx, x0) || !near(bx+bw, x0+w) {
		t.Errorf("clipped: band %v..%v, want the whole plot %v..%v", bx, bx+bw, x0, x0+w)
	}

	for _, out := range []Chart{
		{Fired: c.From.Add(-time.Hour), Resolved: c.From.Add(-time.Minute)},
		{Fired: c.To.Add(time.Second)},
		{},
	} {
		o := c
		o.Fired, o.Resolved = out.Fired, out.Resolved
		if _, _, _, _, ok := plotAndBand(o); ok {
			t.Errorf("fired %v, resolved %v: a band outside the range", out.Fired, out.Resolved)
		}
	}
}

func TestNaNMakesGap(t *testing.T) {
	c := example()
	nan := math.NaN()
	c.Short = series("short", 1, 2, nan, nan, 3, 4, 5)
	c.Long = series("long", 1, nan, 2, 3, nan, 4) // a lone sample becomes a dot
	es := parse(t, render(t, c))
	if d := one(t, es, "burn-short").attr["d"]; strings.Count(d, "M") != 2 || strings.Count(d, "L") != 3 {
		t.Errorf("short d=%q: want two runs, M L then M L L", d)
	}
	if d := one(t, es, "burn-long").attr["d"]; strings.Count(d, "M") != 3 || strings.Count(d, "h0") != 2 {
		t.Errorf("long d=%q: want three runs, the lone first and last samples as dots", d)
	}
}

func TestValuesClamped(t *testing.T) {
	c := example()
	c.Short = series("short", -5, math.Inf(1), math.Inf(-1), 1e300)
	es := parse(t, render(t, c))
	zero, perX, top := yScale(t, es)
	if top > 20 {
		t.Errorf("top tick %v: +Inf and 1e300 must not stretch the scale", top)
	}
	d := one(t, es, "burn-short").attr["d"]
	var ys []float64
	for _, seg := range strings.FieldsFunc(d, func(r rune) bool { return r == 'M' || r == 'L' }) {
		y, _ := strconv.ParseFloat(strings.Fields(seg)[1], 64)
		ys = append(ys, y)
	}
	if top := zero - top*perX; len(ys) != 4 || !near(ys[0], zero) || !near(ys[1], top) || !near(ys[2], zero) || !near(ys[3], top) {
		t.Errorf("d=%q: want -5 and -Inf at 0 (y %v), +Inf and 1e300 at the top (y %v)", d, zero, top)
	}
}

func TestEscapes(t *testing.T) {
	hostile := `<script>alert("x's")</script> & "quotes" 'too'` + "\x01\xff"
	c := example()
	c.Short.Name, c.Long.Name, c.ThresholdLabel, c.Title = hostile, hostile, hostile, hostile
	c.Location = time.FixedZone(`<b>"z"`, 3600)
	svg := render(t, c)
	if strings.Contains(svg, "<script") || strings.Contains(svg, "<b>") || strings.Contains(svg, `"x's"`) {
		t.Fatalf("unescaped text in\n%s", svg)
	}
	es := parse(t, svg)
	want := strings.ToValidUTF8(strings.ReplaceAll(hostile, "\x01", "\uFFFD"), "\uFFFD")
	if es[0].attr["aria-label"] != want || es[1].text != want || one(t, es, "threshold-label").text != want {
		t.Errorf("the decoded text is not the name: %q, want %q", es[1].text, want)
	}
	if !strings.Contains(svg, "times in &lt;b&gt;&#34;z&#34;") {
		t.Errorf("zone name not escaped:\n%s", svg)
	}
}

func TestErrors(t *testing.T) {
	for name, mod := range map[string]func(*Chart){
		"From == To":          func(c *Chart) { c.To = c.From },
		"From after To":       func(c *Chart) { c.From = c.To.Add(time.Second) },
		"zero range":          func(c *Chart) { c.From, c.To = time.Time{}, time.Time{} },
		"threshold 0":         func(c *Chart) { c.Threshold = 0 },
		"threshold NaN":       func(c *Chart) { c.Threshold = math.NaN() },
		"threshold +Inf":      func(c *Chart) { c.Threshold = math.Inf(1) },
		"threshold negative":  func(c *Chart) { c.Threshold = -6 },
		"negative width":      func(c *Chart) { c.Width = -1 },
		"tiny height":         func(c *Chart) { c.Height = 10 },
		"huge width":          func(c *Chart) { c.Width = 1 << 20 },
		"resolved before":     func(c *Chart) { c.Resolved = c.Fired.Add(-time.Second) },
		"resolved, not fired": func(c *Chart) { c.Fired = time.Time{} },
	} {
		c := example()
		mod(&c)
		if svg, err := c.SVG(); err == nil || svg != "" || !strings.HasPrefix(err.Error(), "burnchart: ") {
			t.Errorf("%s: %q, %v; want an error", name, svg, err)
		}
	}
}

func TestEdgeCases(t *testing.T) {
	nan := math.NaN()
	for name, s := range map[string]Series{
		"empty":        {},
		"single point": series("one", 3),
		"all NaN":      series("gone", nan, nan, nan),
		"out of range": {Points: []Point{{t0.Add(-time.Hour), 5}, {t0.Add(time.Hour), 5}}},
		"unsorted":     {Points: []Point{{t0.Add(time.Minute), 2}, {t0, 1}, {t0.Add(30 * time.Second), 3}}},
	} {
		c := example()
		c.Short, c.Long = s, s
		es := parse(t, render(t, c))
		paths := find(es, "burn-short")
		switch name {
		case "single point":
			if len(paths) != 1 || !strings.HasSuffix(paths[0].attr["d"], "h0") {
				t.Errorf("%s: want a dot, got %v", name, paths)
			}
		case "unsorted":
			if d := paths[0].attr["d"]; !strings.HasPrefix(d, "M44.0 ") {
				t.Errorf("%s: d=%q should start at the earliest point", name, d)
			}
		default:
			if len(paths) != 0 {
				t.Errorf("%s: a path %v with nothing to draw", name, paths[0].attr)
			}
			if !strings.Contains(render(t, c), "(no data)") {
				t.Errorf("%s: the legend should say there is no data", name)
			}
		}
	}
}

func TestManyPointsBounded(t *testing.T) {
	c := example()
	c.To = t0.Add(100000 * time.Second)
	var s Series
	for i := range 100000 {
		v := float64(i%97) / 10
		if i%5000 == 0 {
			v = math.NaN()
		}
		s.Points = append(s.Points, Point{t0.Add(time.Duration(i) * time.Second), v})
	}
	c.Short, c.Long = s, s
	start := time.Now()
	svg := render(t, c)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v for 100k points", d)
	}
	if len(svg) > 60000 {
		t.Errorf("%d bytes for 100k points: the lines are not thinned to the pixel columns", len(svg))
	}
	es := parse(t, svg)
	if d := one(t, es, "burn-short").attr["d"]; strings.Count(d, "M") != 20 {
		t.Errorf("%d runs, want 20: one after each of the 20 gaps (the first point is one)", strings.Count(d, "M"))
	}
}

func TestTimeTicksInLocation(t *testing.T) {
	c := example()
	c.From, c.To = t0.Add(-25*time.Minute), t0.Add(5*time.Minute)
	c.Fired, c.Resolved = t0.Add(-10*time.Minute), time.Time{}
	for _, tc := range []struct {
		loc   *time.Location
		first string
	}{{nil, "11:35:00"}, {time.FixedZone("IST", 5*3600+1800), "17:05:00"}} {
		c.Location = tc.loc
		labels := texts(parse(t, render(t, c)), "x-tick")
		if len(labels) < 3 || len(labels) > 8 || labels[0] != tc.first {
			t.Errorf("%v: x ticks %v, want 3 to 8 from %s", tc.loc, labels, tc.first)
		}
	}
}

// TestWritesStandaloneFile leaves an example in a temporary directory; run
// with BURNCHART_OUT=dir to keep one to open in a browser.
func TestWritesStandaloneFile(t *testing.T) {
	dir := cmp.Or(os.Getenv("BURNCHART_OUT"), t.TempDir())
	name := filepath.Join(dir, "burnchart.svg")
	svg := render(t, example())
	if err := os.WriteFile(name, []byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+svg+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	parse(t, string(b))
	if !strings.Contains(string(b), `<svg xmlns="http://www.w3.org/2000/svg" `) {
		t.Error("no xmlns: a browser would not render the file as SVG")
	}
}
