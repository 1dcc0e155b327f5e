package kubernetes

import (
	"fmt"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
)

// checkOperatorSchema checks what the operator's CRDs validate and the Go
// types do not: durations in Prometheus's format (the CRDs' pattern, which
// model.ParseDuration implements), a scrape timeout within its interval,
// one of port and targetPort per endpoint, and matchers the operator's
// own Validate accepts.
func checkOperatorSchema(inv *inventory, _ *repo, _ Overlay) []string {
	var out []string
	dur := func(what string, d string) time.Duration {
		if d == "" {
			return 0
		}
		v, err := model.ParseDuration(d)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %q is not a Prometheus duration: %v", what, d, err))
		}
		return time.Duration(v)
	}
	endpoint := func(what string, interval, timeout monitoringv1.Duration, port bool, targetPort bool) {
		i, t := dur(what+" interval", string(interval)), dur(what+" scrapeTimeout", string(timeout))
		if i > 0 && t > i {
			out = append(out, fmt.Sprintf("%s: scrapeTimeout %s longer than interval %s", what, timeout, interval))
		}
		if port == targetPort {
			out = append(out, what+": want exactly one of port and targetPort")
		}
	}
	for _, sm := range inv.serviceMonitors {
		for i, ep := range sm.Spec.Endpoints {
			endpoint(fmt.Sprintf("ServiceMonitor %s endpoint %d", sm.Name, i), ep.Interval, ep.ScrapeTimeout, ep.Port != "", ep.TargetPort != nil)
		}
	}
	for _, pm := range inv.podMonitors {
		for i, ep := range pm.Spec.PodMetricsEndpoints {
			// targetPort is deprecated on PodMonitors: portNumber is its
			// successor, and a manifest using the old field is still read.
			old := ep.TargetPort != nil //nolint:staticcheck // SA1019: reading it is the point
			endpoint(fmt.Sprintf("PodMonitor %s endpoint %d", pm.Name, i), ep.Interval, ep.ScrapeTimeout, ep.Port != nil, old || ep.PortNumber != nil)
		}
	}
	for _, pr := range inv.rules {
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				if r.For != nil {
					dur(fmt.Sprintf("PrometheusRule %s rule %s%s for", pr.Name, r.Alert, r.Record), string(*r.For))
				}
			}
		}
	}
	for _, ac := range inv.amConfigs {
		if rt := ac.Spec.Route; rt != nil {
			for _, d := range []*monitoringv1.NonEmptyDuration{rt.GroupWait, rt.GroupInterval, rt.RepeatInterval} {
				if d != nil {
					dur("AlertmanagerConfig "+ac.Name+" route", string(*d))
				}
			}
			children, err := rt.ChildRoutes()
			if err != nil {
				out = append(out, err.Error())
			}
			for _, m := range rt.Matchers {
				if err := m.Validate(); err != nil {
					out = append(out, fmt.Sprintf("AlertmanagerConfig %s: %v", ac.Name, err))
				}
			}
			for _, c := range children {
				for _, m := range c.Matchers {
					if err := m.Validate(); err != nil {
						out = append(out, fmt.Sprintf("AlertmanagerConfig %s: %v", ac.Name, err))
					}
				}
			}
		}
		for _, ir := range ac.Spec.InhibitRules {
			for _, m := range append(append(ir.SourceMatch[:0:0], ir.SourceMatch...), ir.TargetMatch...) {
				if err := m.Validate(); err != nil {
					out = append(out, fmt.Sprintf("AlertmanagerConfig %s inhibit rule: %v", ac.Name, err))
				}
			}
		}
	}
	return out
}
