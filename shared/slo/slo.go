// Package slo is the one home of every SLO number in burnlab: the
// thresholds and objectives of the llm-gateway's SLOs, the buckets that
// measure them, and the write-up's "What actually
// moved" table. The gateway and the load generator record with them, the
// calibration and the dashboard are made from them, and a test in stack/
// holds prometheus/slo/llm-gateway.yml (the Sloth spec the rules come from)
// to them.
package slo

import "time"

// The SLOs of prometheus/slo/llm-gateway.yml, on POST /v1/chat/stream.
const (
	// Threshold is the latency objective of one full token stream
	// (stream-latency).
	Threshold = 600 * time.Millisecond
	// Objective is the share of streams that must finish within Threshold
	// over the SLO period (stream-latency), and the share that must not
	// fail (availability).
	Objective = 0.999
	// Budget is their error budget: exactly 0.001, as constant arithmetic
	// is exact.
	Budget = 1 - Objective
	// TTFTThreshold is the time-to-first-token objective of one stream.
	TTFTThreshold = 250 * time.Millisecond
	// TTFTObjective is the share of streams whose first token must come
	// within TTFTThreshold.
	TTFTObjective = 0.99
)

// The synthetic provider's own SLO (prometheus/slo/llm-provider.yml), on
// its non-streaming POST /v1/chat/completions: the answers it gives its
// direct clients, which the gateway never carries. A provider measures
// what it owns: from the request read to the answer written.
const (
	// CompletionThreshold is the latency objective of one non-streaming
	// completion. The provider does no inference: an ordinary answer takes
	// well under a millisecond and the longest the lab asks for a few, so
	// 100 ms is a regression, not noise on a busy machine.
	CompletionThreshold = 100 * time.Millisecond
	// CompletionObjective is the share of completions that must be answered
	// within CompletionThreshold.
	CompletionObjective = 0.999
)

// CompletionBuckets are the buckets of the provider's completion duration
// histogram: the time-to-first-token buckets, which hold
// CompletionThreshold (0.1) too.
var CompletionBuckets = TTFTBuckets

// Buckets are the classic histogram buckets, in seconds, of every stream
// duration histogram in burnlab. They include the threshold exactly (0.6) so
// that `le="0.6"` is an exact SLI, with resolution on both sides of it.
var Buckets = []float64{.01, .05, .1, .2, .3, .4, .5, .6, .75, 1, 2.5, 5, 10, 30}

// TTFTBuckets are the buckets of every time-to-first-token histogram,
// TTFTThreshold (0.25) among them.
var TTFTBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

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
