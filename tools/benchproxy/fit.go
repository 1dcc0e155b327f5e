package benchproxy

import (
	"errors"
	"fmt"
	"math"
)

// PowerFit is cost ≈ Coef · n^Exponent, fitted by least squares on the
// logarithms of both: a straight line on a log-log plot, whose slope is the
// exponent. R2 is the line's coefficient of determination on the
// logarithms: 1 when every point lies on it.
type PowerFit struct {
	Exponent float64 `json:"exponent"`
	Coef     float64 `json:"coefficient"`
	R2       float64 `json:"r2"`
}

// FitPower fits ys ≈ c·xs^k. It needs at least three points (two always
// lie on a line, so their R² says nothing), every x and y positive, and
// two distinct xs.
func FitPower(xs, ys []float64) (PowerFit, error) {
	if len(xs) != len(ys) {
		return PowerFit{}, fmt.Errorf("fit: %d sizes and %d costs", len(xs), len(ys))
	}
	if len(xs) < 3 {
		return PowerFit{}, fmt.Errorf("fit: %d points, want at least 3", len(xs))
	}
	lx, ly := make([]float64, len(xs)), make([]float64, len(ys))
	var mx, my float64
	for i := range xs {
		if !(xs[i] > 0) || !(ys[i] > 0) || math.IsInf(xs[i], 0) || math.IsInf(ys[i], 0) {
			return PowerFit{}, fmt.Errorf("fit: point %d is (%v, %v): a power law needs positive, finite sizes and costs", i, xs[i], ys[i])
		}
		lx[i], ly[i] = math.Log(xs[i]), math.Log(ys[i])
		mx += lx[i]
		my += ly[i]
	}
	mx /= float64(len(lx))
	my /= float64(len(ly))
	var sxx, sxy, syy float64
	for i := range lx {
		dx, dy := lx[i]-mx, ly[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return PowerFit{}, errors.New("fit: every point has the same size; the exponent is undefined")
	}
	k := sxy / sxx
	f := PowerFit{Exponent: k, Coef: math.Exp(my - k*mx), R2: 1}
	if syy > 0 {
		// The residual sum of squares over the total: 1 − SSres/SStot,
		// where SSres = syy − k·sxy for a least-squares line.
		f.R2 = 1 - (syy-k*sxy)/syy
	}
	return f, nil
}
