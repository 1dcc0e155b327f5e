// Package slo holds the stream-latency SLO that every part of burnlab measures
// against, and the write-up's "What actually moved" table. It is not internal:
// the load generator reports against the same threshold and buckets.
package slo

import "time"

const (
	// Threshold is the latency objective of one full token stream.
	Threshold = 600 * time.Millisecond
	// Objective is the share of streams that must finish within Threshold over
	// the 30-day window; 1-Objective is the error budget (0.1%).
	Objective = 0.999
)

// Buckets are the classic histogram buckets, in seconds, of every stream
// duration histogram in burnlab. They include the threshold exactly (0.6) so
// that `le="0.6"` is an exact SLI, with resolution on both sides of it.
var Buckets = []float64{.01, .05, .1, .2, .3, .4, .5, .6, .75, 1, 2.5, 5, 10, 30}

// BurnRate is how many times faster than sustainable the error budget burns
// when breaches of total streams miss the objective: 1 spends exactly the
// budget over the SLO period, 10 spends it in a tenth of it.
func BurnRate(breaches, total int) float64 {
	if total == 0 {
		return 0
	}
	return BreachRate(breaches, total) / (1 - Objective)
}

// BreachRate is the share of streams that missed the objective.
func BreachRate(breaches, total int) float64 {
	if total == 0 {
		return 0
	}
	return float64(breaches) / float64(total)
}
