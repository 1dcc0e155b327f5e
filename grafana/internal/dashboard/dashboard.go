// Package dashboard builds burnlab's Grafana dashboard as code with the
// Grafana Foundation SDK. The generated JSON is committed under
// grafana/dashboards/ and provisioned by file; `make dashboards` rebuilds it.
package dashboard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"burnlab/shared/scenario"
	"burnlab/shared/slo"
)

// UID, PrometheusUID and PagerUID are fixed so links, provisioning and
// tests can name them.
const (
	UID           = "burnlab-llm-gateway-slo"
	PrometheusUID = "burnlab-prometheus"
	PagerUID      = "burnlab-pager"
	PagerPluginID = "burnlab-pager-datasource"
	Title         = "LLM gateway — stream latency SLO"
)

var (
	promDS  = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr(PrometheusUID)}
	pagerDS = common.DataSourceRef{Type: cog.ToPtr(PagerPluginID), Uid: cog.ToPtr(PagerUID)}
)

// pagerQuery is a query of burnlab's pager datasource plugin.
type pagerQuery struct{ queryType string }

func (q pagerQuery) Build() (variants.Dataquery, error) {
	return variants.UnknownDataquery{"refId": "A", "queryType": q.queryType, "datasource": pagerDS}, nil
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend)
}

// The streams the SLIs count, as in prometheus/slo/llm-gateway.yml: the
// SLO's route, without a probe tenant's (the loadgen's calibration); and
// the SLO's numbers from the one place they live.
const sli = `route="/v1/chat/stream",traffic!="probe"`

var (
	budget    = strconv.FormatFloat(slo.Budget, 'g', -1, 64)
	threshold = fmt.Sprintf("%d ms", slo.Threshold.Milliseconds())
	objective = strconv.FormatFloat(100*slo.Objective, 'g', -1, 64) + " %"
)

// ruleSets are each rule file's SLO period and shortest window, the error
// ratio the budget is summed from (prometheus/rules: the lab's 10h and
// the workbook's 30d). Only one set's recordings exist on a stack.
var ruleSets = []struct{ shortest, period time.Duration }{
	{30 * time.Second, 10 * time.Hour},
	{5 * time.Minute, 30 * 24 * time.Hour},
}

// budgetLeft is the share of the period's budget not yet spent, as the
// pager and the alerts' budget annotation say it (shared/slo.SpentExpr),
// for whichever rule set the stack runs: one query, each set's figure
// joined with `or`, so that it has data on any stack. Sloth's
// slo:period_error_budget_remaining:ratio is 1 − the mean burn over the
// history there is, which reads ten budgets gone minutes into a 10x burn.
func budgetLeft() *stat.PanelBuilder {
	var left []string
	for _, r := range ruleSets {
		left = append(left, "(1 - "+slo.SpentExprOf(`sloth_service="llm-gateway"`, r.shortest, r.period)+")")
	}
	return single("Error budget remaining", "Budget left for the period, per SLO: 100 % less the bad streams so far over all the period allows; the part of the period before Prometheus's history counts as no error. Only stream-latency should fall; availability and ttft stay full.", "percentunit",
		query(strings.Join(left, " or "), "{{sloth_slo}}")).Decimals(1)
}

func series(title, description, unit string, span uint32, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(promDS).Height(8).Span(span)
	for _, q := range queries {
		p = p.WithTarget(q)
	}
	return p
}

func single(title, description, unit string, q *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(promDS).Height(4).Span(6).WithTarget(q).
		GraphMode(common.BigValueGraphModeArea)
}

// quantiles plots p50, p99 and p99.9 of a histogram. With exemplars, its
// p99 query also asks Prometheus for the buckets' exemplars: one query
// only, since each would fetch the same points again, and the one drawn
// beside the tail, where a slow stream's request ID is wanted.
func quantiles(metric, who, selector string, exemplars bool) []*prometheus.DataqueryBuilder {
	var qs []*prometheus.DataqueryBuilder
	for _, q := range []struct{ q, name string }{{"0.5", "p50"}, {"0.99", "p99"}, {"0.999", "p99.9"}} {
		b := query(`histogram_quantile(`+q.q+`, sum by (le) (rate(`+metric+`_bucket{`+selector+`}[$__rate_interval])))`, who+" "+q.name)
		if exemplars && q.name == "p99" {
			b = b.Exemplar(true)
		}
		qs = append(qs, b)
	}
	return qs
}

// activeScenario is the upstream's active scenario among those matching,
// as a series of value 1 labelled with its name.
func activeScenario(matching string) string {
	return `max by (scenario) (` + scenario.Metric + matching + `) == 1`
}

// burnThresholds draws the lab's and production's page thresholds.
func burnThresholds() *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
		{Color: "green"},
		{Value: cog.ToPtr(6.0), Color: "orange"},
		{Value: cog.ToPtr(14.4), Color: "red"},
	})
}

// Build returns the dashboard.
func Build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder(Title).
		Uid(UID).
		Description("The write-up's incident: up, no 5xx, a fine p50 — and the stream-latency budget burning. Look at burn rate before latency, allocation before CPU.").
		Tags([]string{"burnlab", "slo", "llm-gateway"}).
		Refresh("10s").
		Time("now-30m", "now").
		Timezone(common.TimeZoneBrowser).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Pages").
			Datasource(dashboard.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr(PrometheusUID)}).
			Enable(true).
			IconColor("red").
			Expr(`ALERTS{alertstate="firing", severity="page", sloth_service="llm-gateway"}`)).
		// While a fault scenario runs (make scenario), every time series
		// shows it as a region: what was injected, beside what burned.
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Scenarios").
			Datasource(dashboard.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr(PrometheusUID)}).
			Enable(true).
			IconColor("purple").
			Expr(activeScenario(`{scenario!="` + scenario.None + `"}`)).
			TitleFormat("scenario {{scenario}}").
			TagKeys("scenario").
			Step("15s"))

	b = b.WithRow(dashboard.NewRowBuilder("Error budget")).
		WithPanel(single("SLI now (stream latency)", "Share of streams within "+threshold+" over the shortest alert window. Under "+objective+" the budget is burning.", "percentunit",
			query(`1 - max(slo:current_burn_rate:ratio{sloth_slo="stream-latency"}) * `+budget, "SLI")).Decimals(2)).
		WithPanel(single("SLI over the SLO period", "Share of streams within "+threshold+" over the whole SLO period (10 h in the lab, 30 d in production).", "percentunit",
			query(`1 - max(slo:period_burn_rate:ratio{sloth_slo="stream-latency"}) * `+budget, "SLI")).Decimals(3)).
		WithPanel(budgetLeft()).
		WithPanel(single("Gateway build", "Which transcript parser is running: baseline (regexp + string +=) or fixed (HasPrefix + Builder).", "none",
			query(`max by (variant) (gateway_build_info)`, "{{variant}}")).Span(3)).
		WithPanel(single("Scenario", "The fault the lab's upstream injects now (make scenario S=…; none: a healthy upstream). docs/scenarios.md's table says what each must fire.", "none",
			query(activeScenario(""), "{{scenario}}")).Span(3).TextMode(common.BigValueTextModeName).GraphMode(common.BigValueGraphModeNone)).
		WithPanel(series("Burn rate by window (stream latency)", "Error ratio over each alert window divided by the "+strconv.FormatFloat(100*slo.Budget, 'g', -1, 64)+" % budget. A page needs a long and its short window both over 14.4x or both over 6x (the lines).", "x", 12,
			query(`{__name__=~"slo:sli_error:ratio_rate.+", sloth_slo="stream-latency", sloth_window!~"10h|30d"} / `+budget, "{{sloth_window}}")).
			Thresholds(burnThresholds()).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine))).
		WithPanel(series("Burn rate, all three SLOs", "Burn rate over the shortest window per SLO: the write-up's point — latency burns while availability and TTFT stay at 0.", "x", 12,
			query(`slo:current_burn_rate:ratio`, "{{sloth_slo}}")).
			Thresholds(burnThresholds()).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)))

	b = b.WithRow(dashboard.NewRowBuilder("Latency and traffic")).
		WithPanel(series("Stream duration: server and client", "p50 stays low while p99 and p99.9 cross "+threshold+": a tail, not a flood. Client (loadgen) times include queueing from the scheduled start. "+
			"The dots are the gateway's exemplars: hover one for its stream's request_id and tenant, the request_id of its log line.", "s", 12,
			append(quantiles("gateway_stream_duration_seconds", "server", sli+`,outcome="ok"`, true),
				quantiles("loadgen_stream_duration_seconds", "client", `outcome="ok"`, false)...)...).
			Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
				{Color: "green"}, {Value: cog.ToPtr(slo.Threshold.Seconds()), Color: "red"}})).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine))).
		WithPanel(series("Streams per second by outcome", "No 5xx spike: streams keep ending ok, just late. upstream_error would show a real outage.", "reqps", 12,
			query(`sum by (outcome) (rate(gateway_stream_duration_seconds_count{`+sli+`}[$__rate_interval]))`, "server {{outcome}}"),
			query(`sum by (outcome) (rate(loadgen_streams_total[$__rate_interval]))`, "client {{outcome}}"))).
		WithPanel(series("Time to first token", "TTFT stays under its "+fmt.Sprintf("%d ms", slo.TTFTThreshold.Milliseconds())+" objective in both builds: the first event is cheap even for the baseline parser.", "s", 12,
			query(`histogram_quantile(0.99, sum by (le) (rate(gateway_stream_ttft_seconds_bucket{`+sli+`}[$__rate_interval])))`, "server p99"),
			query(`histogram_quantile(0.99, sum by (le) (rate(loadgen_ttft_seconds_bucket[$__rate_interval])))`, "client p99"))).
		WithPanel(series("Page and ticket alerts", "Firing burn-rate alerts by severity; the page should appear minutes after the baseline starts and clear after the switch to fixed.", "none", 12,
			query(`sum by (sloth_slo, severity) (ALERTS{alertstate="firing", sloth_service="llm-gateway"})`, "{{sloth_slo}} {{severity}}")))

	b = b.WithRow(dashboard.NewRowBuilder("Garbage: allocation before CPU")).
		WithPanel(series("Gateway allocation rate", "Bytes allocated per second. The baseline's transcript (regexp + string +=) allocates gigabytes a second; alloc_space in pprof names the function.", "Bps", 8,
			query(`rate(go_gc_heap_allocs_bytes_total{job="gateway"}[$__rate_interval])`, "allocated"))).
		WithPanel(series("Gateway GC share of CPU", "Share of the CPU the gateway used that went to collecting garbage, and the part of it the runtime charged to the allocating request goroutines (mark assist): where the baseline's tail latency goes. The pager's page reads the same over the burn and before it; after the fix both fall back.", "percentunit", 8,
			query(`sum(rate(go_cpu_classes_gc_total_cpu_seconds_total{job="gateway"}[$__rate_interval])) / sum(rate(process_cpu_seconds_total{job="gateway"}[$__rate_interval]))`, "GC").RefId("A"),
			query(`sum(rate(go_cpu_classes_gc_mark_assist_cpu_seconds_total{job="gateway"}[$__rate_interval])) / sum(rate(process_cpu_seconds_total{job="gateway"}[$__rate_interval]))`, "mark assist").RefId("B"))).
		WithPanel(series("Gateway heap", "Live heap and the GC's goal; a fire hose of short-lived strings keeps the collector running without a leak.", "bytes", 8,
			query(`go_gc_heap_live_bytes{job="gateway"}`, "live"),
			query(`go_gc_heap_goal_bytes{job="gateway"}`, "goal"))).
		WithPanel(dashboard.NewPanelBuilder().Type("flamegraph").
			Title("Heap profile at the last page (alloc_space)").
			Description("Captured by the pager the moment the page fired: the widest frame is the function making the garbage — transcript.(*Baseline).Append in the baseline build.").
			Datasource(pagerDS).Height(14).Span(24).WithTarget(pagerQuery{"flamegraph"})).
		WithPanel(table.NewPanelBuilder().
			Title("Incidents").
			Description("Every page and ticket the pager received, with its burn rate, timeline and the top alloc_space function of its profile.").
			Datasource(pagerDS).Height(8).Span(24).WithTarget(pagerQuery{"incidents"}))
	return b.Build()
}

// JSON is the dashboard as provisioned.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
