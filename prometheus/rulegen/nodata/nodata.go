// Package nodata adds to a Sloth rule file the alert Sloth does not
// write: an SLO's SLI has no data.
//
// Sloth's rules divide the SLI's error rate by its total rate. When the
// series they read are missing (the gateway's scrape fails, its target is
// gone, a metric was renamed), every division returns nothing, every burn
// rate vanishes and every burn-rate alert resolves: a dead scrape silences
// each SLO at once and says nothing. The alert written here fires instead.
//
// The signal is Sloth's own shortest-window recording of each SLO,
// slo:sli_error:ratio_rate<W>{sloth_id=…}. It is there, as a number or as
// NaN (0/0, no traffic), whenever Prometheus holds at least two samples of
// the SLI's series within W; it is absent only when the series have no
// samples at all in W. The gateway creates its SLI series at zero when it
// starts, so an idle gateway reads as no traffic, never as no data. An
// absence that lasts another W (the alert's `for:`) is no restart of the
// gateway or Prometheus: both come back within seconds, inside W.
//
// One alert per service counts the SLOs without data, so one dead scrape
// is one page, not one per SLO. It pages rather than opening a ticket:
// while it fires, no SLO of the service can page, however fast it burns.
package nodata

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// GroupPrefix names the group written for each service.
const GroupPrefix = "slo-sli-no-data-"

// AlertName is the alert's name, for every service.
const AlertName = "SLOSLINoData"

// SLI is one SLO's shortest-window error-ratio recording in a Sloth rule
// file.
type SLI struct {
	Service, SLO, ID string
	Record           string // slo:sli_error:ratio_rate<Window>
	Window           time.Duration
	Labels           map[string]string // the recording's, from the spec
}

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record string
			Alert  string
			Labels map[string]string
		}
	}
}

const recordPrefix = "slo:sli_error:ratio_rate"

// Find reads a Sloth rule file and returns, per SLO in the file's order,
// its shortest-window SLI recording.
func Find(sloth []byte) ([]SLI, error) {
	var f ruleFile
	if err := yaml.Unmarshal(sloth, &f); err != nil {
		return nil, fmt.Errorf("nodata: reading the rule file: %w", err)
	}
	var out []SLI
	seen := map[string]bool{}
	for _, g := range f.Groups {
		if strings.HasPrefix(g.Name, GroupPrefix) {
			return nil, fmt.Errorf("nodata: the rule file already has group %s: regenerate it with Sloth first", g.Name)
		}
		var best *SLI
		for _, r := range g.Rules {
			w, ok := strings.CutPrefix(r.Record, recordPrefix)
			if !ok {
				continue
			}
			d, err := model.ParseDuration(w)
			if err != nil {
				return nil, fmt.Errorf("nodata: group %s: recording %s: %w", g.Name, r.Record, err)
			}
			s := SLI{Service: r.Labels["sloth_service"], SLO: r.Labels["sloth_slo"], ID: r.Labels["sloth_id"], Record: r.Record, Window: time.Duration(d), Labels: r.Labels}
			if s.Service == "" || s.SLO == "" || s.ID == "" {
				return nil, fmt.Errorf("nodata: group %s: recording %s lacks Sloth's sloth_service, sloth_slo or sloth_id label", g.Name, r.Record)
			}
			if best == nil || s.Window < best.Window {
				best = &s
			}
		}
		if best == nil {
			continue
		}
		if seen[best.ID] {
			return nil, fmt.Errorf("nodata: SLO %s has SLI recordings in two groups", best.ID)
		}
		seen[best.ID] = true
		out = append(out, *best)
	}
	if len(out) == 0 {
		return nil, errors.New("nodata: the rule file has no Sloth SLI recording (slo:sli_error:ratio_rate<window>)")
	}
	return out, nil
}

// Append returns the Sloth rule file with a no-data group per service
// after Sloth's groups. The file's text is kept byte for byte; the groups
// are written in a fixed order, so a regeneration can be compared with
// the committed file.
func Append(sloth []byte) ([]byte, error) {
	slis, err := Find(sloth)
	if err != nil {
		return nil, err
	}
	var services []string
	by := map[string][]SLI{}
	for _, s := range slis {
		if by[s.Service] == nil {
			services = append(services, s.Service)
		}
		by[s.Service] = append(by[s.Service], s)
	}
	var b bytes.Buffer
	b.Write(sloth)
	if !bytes.HasSuffix(sloth, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.WriteString("# Appended by prometheus/rulegen/cmd/nodata-rules (make rules), not by Sloth: the alert\n" +
		"# that an SLO's SLI has no data, which Sloth's rules cannot say\n" +
		"# (prometheus/rulegen/nodata explains it). DO NOT EDIT.\n")
	for _, svc := range services {
		if err := writeGroup(&b, svc, by[svc]); err != nil {
			return nil, err
		}
	}
	// The result must still be one YAML document of rule groups.
	var check ruleFile
	if err := yaml.Unmarshal(b.Bytes(), &check); err != nil {
		return nil, fmt.Errorf("nodata: the appended file does not parse: %w", err)
	}
	return b.Bytes(), nil
}

func writeGroup(b *bytes.Buffer, service string, slis []SLI) error {
	window := slis[0].Window
	var names, terms []string
	for _, s := range slis {
		window = max(window, s.Window)
		names = append(names, s.SLO)
		terms = append(terms, fmt.Sprintf("absent(%s{sloth_id=%q})", s.Record, s.ID))
	}
	// The labels every SLO of the service shares (the spec's), but for
	// the ones that name one SLO or window.
	labels := map[string]string{}
	for k, v := range slis[0].Labels {
		if k == "sloth_slo" || k == "sloth_id" || k == "sloth_window" {
			continue
		}
		if !slices.ContainsFunc(slis, func(s SLI) bool { return s.Labels[k] != v }) {
			labels[k] = v
		}
	}
	labels["severity"] = "page"
	// Indented by two, as Sloth writes.
	node := func(v any) (string, error) {
		var out bytes.Buffer
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		err := enc.Encode(v)
		return strings.TrimSuffix(out.String(), "\n"), err
	}
	fmt.Fprintf(b, "- name: %s%s\n  rules:\n  - alert: %s\n", GroupPrefix, service, AlertName)
	expr := "count(\n  " + strings.Join(terms, "\n  or ") + "\n)\n"
	e, err := node(map[string]string{"expr": expr})
	if err != nil {
		return err
	}
	b.WriteString(indent(e, "    ") + "\n")
	fmt.Fprintf(b, "    for: %s\n", model.Duration(window))
	l, err := node(map[string]map[string]string{"labels": labels})
	if err != nil {
		return err
	}
	b.WriteString(indent(l, "    ") + "\n")
	n := len(slis)
	annotations := map[string]string{
		"summary": fmt.Sprintf("%s: {{ $value }} of its %d SLOs (%s) have no SLI data, so their burn-rate alerts cannot fire", service, n, strings.Join(names, ", ")),
		"description": fmt.Sprintf("Sloth's %s recordings of %s are missing: Prometheus has had no sample of the SLI's series for at least %s. "+
			"Every burn rate of these SLOs is gone and their alerts have resolved, whatever the service does.", recordPrefix+"<window>", service, model.Duration(2*window)),
		"runbook": "Open Prometheus's /targets: a scrape that fails (up == 0), a target gone, or a metric renamed. Until the SLI has data again, watch the service by hand.",
	}
	a, err := node(map[string]map[string]string{"annotations": annotations})
	if err != nil {
		return err
	}
	b.WriteString(indent(a, "    ") + "\n")
	return nil
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}
