// Package alerttest makes Alertmanager webhook notifications for the
// pager's tests: alerts as Alertmanager sends them, in payload version 4.
package alerttest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	"burnlab/pager/internal/store"
)

// Alert is the stream-latency SLO's alert of a severity, as Alertmanager
// sends it, firing or resolved, with a fingerprint of the severity's own.
func Alert(status string, severity string, starts time.Time) map[string]any {
	a := map[string]any{
		"status": status,
		"labels": map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": severity,
			"sloth_slo": "stream-latency", "sloth_service": "llm-gateway"},
		"annotations": map[string]string{"burn_rate": "10.2x", "summary": "burning"},
		"startsAt":    starts.Format(time.RFC3339Nano),
		"endsAt":      "0001-01-01T00:00:00Z",
		"fingerprint": Fingerprint(severity),
	}
	if status == "resolved" {
		a["endsAt"] = starts.Add(5 * time.Minute).Format(time.RFC3339Nano)
	}
	return a
}

// Fingerprint makes an Alertmanager-shaped fingerprint (16 lowercase hex
// digits) from a name, so each fixture's alert has its own.
func Fingerprint(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("%016x", h.Sum64())
}

// With sets a field of an alert and returns it.
func With(a map[string]any, k string, v any) map[string]any {
	a[k] = v
	return a
}

// Notification is a payload of the alerts, the first one's status its own.
func Notification(alerts ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"version": "4", "groupKey": "{}:{}", "status": alerts[0]["status"], "receiver": "pager-page", "alerts": alerts})
	return string(b)
}

// SlothAlert is alert i of one group as this repo's Alertmanager sends it
// for the stream-latency page: Sloth's labels and annotations, Prometheus's
// generator URL (the rule's whole expression, escaped), and a label that
// tells the group's alerts apart.
func SlothAlert(i int, start time.Time) map[string]any {
	expr := `(max(slo:sli_error:ratio_rate30s{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (14.4 * 0.0009999999999999432)) without (sloth_window)` +
		` and max(slo:sli_error:ratio_rate1m{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (14.4 * 0.0009999999999999432)) without (sloth_window))` +
		` or (max(slo:sli_error:ratio_rate2m{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (6 * 0.0009999999999999432)) without (sloth_window)` +
		` and max(slo:sli_error:ratio_rate4m{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (6 * 0.0009999999999999432)) without (sloth_window))`
	return map[string]any{
		"status": "firing",
		"labels": map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "category": "latency", "lab": "burnlab", "owner": "burnlab",
			"route": "/v1/chat/stream", "severity": "page", "sloth_id": "llm-gateway-stream-latency", "sloth_service": "llm-gateway",
			"sloth_severity": "page", "sloth_slo": "stream-latency", "tenant": fmt.Sprintf("tenant-%05d", i)},
		"annotations": map[string]string{"burn_rate": "14.9x",
			"description": "Streams on /v1/chat/stream take over 600 ms more often than the budget allows. No 5xx and a fine p50 do not mean healthy: look at the tail.",
			"pager_url":   "http://127.0.0.1:5001/slo/stream-latency",
			"runbook":     "Profile allocation before CPU: go tool pprof -top -sample_index=alloc_space http://gateway:6060/debug/pprof/allocs — the top flat function is the one making the garbage.",
			"summary":     "llm-gateway is burning its stream-latency error budget (600 ms, 99.9%)",
			"title":       "(page) llm-gateway stream-latency SLO error budget burn rate is too fast."},
		"startsAt":     start.Format(time.RFC3339Nano),
		"endsAt":       "0001-01-01T00:00:00Z",
		"generatorURL": "http://prometheus:9090/graph?g0.expr=" + url.QueryEscape(expr) + "&g0.tab=1",
		"fingerprint":  Fingerprint(fmt.Sprint("sloth ", i)),
	}
}

// Group is one Alertmanager notification of n alerts, as its webhook
// notifier sends it: the common and group labels too.
func Group(n int, start time.Time, pad int) string {
	alerts := make([]map[string]any, n)
	for i := range alerts {
		alerts[i] = SlothAlert(i, start)
		if pad > 0 {
			alerts[i]["annotations"].(map[string]string)["pad"] = strings.Repeat("x", pad)
		}
	}
	b, _ := json.Marshal(map[string]any{"version": "4", "groupKey": `{}/{severity="page"}:{alertname="LLMGatewayStreamLatencyBudgetBurn", severity="page", sloth_service="llm-gateway", sloth_slo="stream-latency"}`,
		"truncatedAlerts": 0, "status": "firing", "receiver": "pager-page", "externalURL": "http://alertmanager:9093", "alerts": alerts,
		"groupLabels":       map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_service": "llm-gateway", "sloth_slo": "stream-latency"},
		"commonLabels":      map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_service": "llm-gateway", "sloth_slo": "stream-latency"},
		"commonAnnotations": map[string]string{"pager_url": "http://127.0.0.1:5001/slo/stream-latency"}})
	return string(b)
}

// SlothIncident is the pager's incident of SlothAlert(i, start).
func SlothIncident(i int, start time.Time) string {
	return store.IncidentID(&store.Alert{Fingerprint: Fingerprint(fmt.Sprint("sloth ", i)), StartsAt: start})
}
