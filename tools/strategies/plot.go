package strategies

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WritePictures draws, for each window table and incident, the burn over
// time at the lab's traffic (the fault's own and the shipped page pairs'
// windows) with each strategy's firing spans as bars beneath, into
// dir/<windows>-<incident>.svg.
func (t Table) WritePictures(dir string, windows []Windows) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, w := range windows {
		for _, in := range t.Incidents[w.Name] {
			h, ok := t.Histories[[3]string{w.Name, in.Name, "lab"}]
			if !ok {
				continue
			}
			p, err := picture(w, in, h, t.Strategies[w.Name])
			if err != nil {
				return err
			}
			if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, w.Name+"-"+in.Name+".svg")); err != nil {
				return fmt.Errorf("picture %s %s: %w", w.Name, in.Name, err)
			}
		}
	}
	return nil
}

// unit is the picture's time axis: hours for a table of days, minutes
// for the lab's.
func unit(w Windows) (time.Duration, string) {
	if w.Period >= 24*time.Hour {
		return time.Hour, "hours"
	}
	return time.Minute, "minutes"
}

func picture(w Windows, in Incident, h History, ss []Strategy) (*plot.Plot, error) {
	u, uname := unit(w)
	x := func(d time.Duration) float64 { return float64(d-h.Start) / float64(u) }
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %s windows: burn; pages red, tickets amber", in.Name, w.Name)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = uname + " since the fault began"
	p.Y.Label.Text = "burn rate (x budget)"
	p.Legend.Top = true

	top := 1.0
	for _, b := range h.Burn {
		top = max(top, b.Truth)
		for _, v := range b.Windows {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	for _, pair := range w.Pairs {
		if pair.Severity == "page" {
			top = max(top, pair.Factor)
		}
	}
	var wins []string
	for _, win := range plotted(w) {
		wins = append(wins, dur(win))
	}
	palette := []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{R: 200, G: 120, A: 255}, color.RGBA{R: 120, B: 160, A: 255}}
	// A picture needs no more than about 1,500 points a line.
	burn := h.Burn
	if stride := len(burn)/1500 + 1; stride > 1 {
		var thin []BurnPoint
		for i := 0; i < len(burn); i += stride {
			thin = append(thin, burn[i])
		}
		burn = thin
	}
	truth := make(plotter.XYs, 0, len(burn))
	for _, b := range burn {
		truth = append(truth, plotter.XY{X: x(b.At), Y: b.Truth})
	}
	l, err := plotter.NewLine(truth)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = color.Black, vg.Points(1)
	p.Add(l)
	p.Legend.Add("the fault's burn", l)
	for i, win := range wins {
		var pts plotter.XYs
		for _, b := range burn {
			if v, ok := b.Windows[win]; ok && !math.IsNaN(v) {
				pts = append(pts, plotter.XY{X: x(b.At), Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(1.2)
		p.Add(l)
		p.Legend.Add("burn over "+win, l)
	}
	for _, pair := range w.Pairs {
		if pair.Severity != "page" {
			continue
		}
		th := plotter.NewFunction(func(float64) float64 { return pair.Factor })
		th.Dashes, th.Color = []vg.Length{vg.Points(4), vg.Points(3)}, color.Gray{Y: 100}
		p.Add(th)
		p.Legend.Add(fmt.Sprintf("%s threshold %gx", pair.Name, pair.Factor), th)
	}

	// The strategies' bars lie below zero, one lane each.
	lane := top / 12
	ticks := []plot.Tick{}
	for _, v := range []float64{0, top / 4, top / 2, 3 * top / 4, top} {
		ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprintf("%.3g", v)})
	}
	for i, s := range ss {
		y := -float64(i+1) * lane
		ticks = append(ticks, plot.Tick{Value: y, Label: s.Key})
		// Pages first, tickets over them thinner: both show where they
		// overlap.
		spans := slices.Clone(h.Spans[s.Key])
		slices.SortStableFunc(spans, func(a, b Span) int { return int(a.Severity[0]) - int(b.Severity[0]) })
		for _, sp := range spans {
			bar, err := plotter.NewLine(plotter.XYs{{X: x(sp.From), Y: y}, {X: x(sp.To), Y: y}})
			if err != nil {
				return nil, err
			}
			bar.Width, bar.Color = vg.Points(3), color.RGBA{R: 230, G: 170, B: 30, A: 255} // ticket
			if sp.Severity == "page" {
				bar.Width, bar.Color = vg.Points(7), color.RGBA{R: 210, G: 30, B: 30, A: 255}
			}
			p.Add(bar)
		}
	}
	slices.SortFunc(ticks, func(a, b plot.Tick) int { return int(math.Copysign(1, a.Value-b.Value)) })
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -float64(len(ss)+1)*lane, top*1.1
	p.X.Min, p.X.Max = x(h.Burn[0].At), x(h.End)
	fault := plotter.NewFunction(func(float64) float64 { return 0 })
	fault.Color = color.Gray{Y: 180}
	p.Add(fault)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(1)
	p.Legend.XOffs = -vg.Points(4)
	return p, nil
}
