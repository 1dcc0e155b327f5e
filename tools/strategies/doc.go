// Package strategies measures the SRE workbook's ways to alert on an SLO
// (its "Alerting on SLOs" chapter: six approaches, from a threshold at the
// SLO to multiwindow, multi-burn-rate alerts), and two naive alerts, by
// backtest: each strategy's rules are evaluated by the pinned Prometheus's
// own rule manager and PromQL engine over a synthetic history of the
// gateway's metrics, faster than real time.
//
// Terms used throughout:
//   - a window table is a Sloth AlertWindows file: an SLO period and four
//     pairs of windows (page quick and slow, ticket quick and slow), each
//     with the share of the budget it allows in its long window;
//   - the burn is the SLI's error ratio over the budget: 1 spends the budget
//     in exactly the SLO period;
//   - an incident is a fault on one SLO from a clean history: every window
//     full of good traffic first;
//   - a cell is one strategy's outcome for one incident at one traffic level
//     under one window table: what fired, when, when it reset, and the
//     budget spent first, each next to what the workbook's arithmetic
//     predicts (Expect).
package strategies
