package main

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"burnlab/tools/benchproxy"
)

// drawScaling draws, side by side on log-log axes, each build's bytes and
// CPU per stream against the stream's length: measured points, and the
// fitted power law as a line whose slope is the exponent.
func drawScaling(path string, rep *benchproxy.ScalingReport) error {
	kinds := []struct {
		title, unit string
		cost        func(benchproxy.ScalingPoint) float64
		fit         func(benchproxy.BuildScaling) (k, r2 float64)
	}{
		{"bytes allocated per stream", "KiB", func(p benchproxy.ScalingPoint) float64 { return p.AllocBytes / 1024 },
			func(b benchproxy.BuildScaling) (float64, float64) { return b.AllocExponent, b.AllocR2 }},
		{"CPU per stream", "ms", func(p benchproxy.ScalingPoint) float64 { return p.CPUMsPerStream },
			func(b benchproxy.BuildScaling) (float64, float64) { return b.CPUExponent, b.CPUR2 }},
	}
	colors := map[string]color.Color{"baseline": color.RGBA{R: 200, A: 255}, "fixed": color.RGBA{G: 130, B: 60, A: 255}}
	var plots [][]*plot.Plot
	row := []*plot.Plot{}
	for _, k := range kinds {
		p := plot.New()
		p.Title.Text = k.title + " (log-log)"
		p.X.Label.Text = "events per stream"
		p.Y.Label.Text = k.unit
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.YOffs, p.Legend.XOffs = -vg.Points(8), vg.Points(8)
		p.Title.Padding = vg.Points(8)
		for _, b := range rep.Builds {
			var pts plotter.XYs
			for _, pt := range b.Points {
				pts = append(pts, plotter.XY{X: float64(pt.Events), Y: k.cost(pt)})
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			c := colors[b.Variant]
			sc.Color = c
			// The fitted law through the points' centre: a line on these axes.
			exp, r2 := k.fit(b)
			var mx, my float64
			for _, pt := range pts {
				mx += math.Log(pt.X)
				my += math.Log(pt.Y)
			}
			mx, my = mx/float64(len(pts)), my/float64(len(pts))
			law := plotter.NewFunction(func(x float64) float64 { return math.Exp(my + exp*(math.Log(x)-mx)) })
			law.Color, law.Width = c, vg.Points(1)
			law.XMin, law.XMax = pts[0].X, pts[len(pts)-1].X
			p.Add(sc, law)
			p.Legend.Add(fmt.Sprintf("%s: n^%.2f (R² %.3f)", b.Variant, exp, r2), sc, law)
			// The axes hold the fitted lines' ends as well as the points.
			for _, x := range []float64{law.XMin, law.XMax} {
				y := law.F(x)
				p.Y.Min, p.Y.Max = math.Min(p.Y.Min, y/1.2), math.Max(p.Y.Max, y*1.2)
			}
		}
		row = append(row, p)
	}
	plots = append(plots, row)
	c := vgsvg.New(11*vg.Inch, 4.5*vg.Inch)
	canvases := plot.Align(plots, draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(12)}, draw.New(c))
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
