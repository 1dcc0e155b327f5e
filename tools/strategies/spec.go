package strategies

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	prometheusv1 "github.com/slok/sloth/pkg/prometheus/api/v1"
	"sigs.k8s.io/yaml"

	"burnlab/prometheus/rulegen/guard"
)

// SLO is what a strategy needs of one SLO of a Sloth spec: its budget and
// its SLI, as the error and total queries with Sloth's {{.window}} left to
// fill in.
type SLO struct {
	Name       string
	Budget     float64 // 1 − objective
	ErrorQuery string
	TotalQuery string
}

// Ratio is the SLI's error ratio over window, as Sloth writes it.
func (s SLO) Ratio(window string) string {
	fill := func(q string) string { return strings.TrimSpace(strings.ReplaceAll(q, "{{.window}}", window)) }
	return fmt.Sprintf("(%s)\n/\n(%s)", fill(s.ErrorQuery), fill(s.TotalQuery))
}

// Spec is a Sloth prometheus/v1 spec: Sloth generates the shipped
// strategy from its file, the others are written from its SLOs.
type Spec struct {
	Path    string
	Service string
	SLOs    []SLO
}

// LoadSpec reads a Sloth prometheus/v1 spec.
func LoadSpec(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("spec: %w", err)
	}
	var s prometheusv1.Spec
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Spec{}, fmt.Errorf("spec %s: %w", path, err)
	}
	if s.Version != prometheusv1.Version {
		return Spec{}, fmt.Errorf("spec %s: version %q, want %q", path, s.Version, prometheusv1.Version)
	}
	spec := Spec{Path: path, Service: s.Service}
	for _, o := range s.SLOs {
		if o.SLI.Events == nil {
			return Spec{}, fmt.Errorf("spec %s: SLO %s: only an events SLI (error_query, total_query) can be backtested", path, o.Name)
		}
		if o.Objective <= 0 || o.Objective >= 100 {
			return Spec{}, fmt.Errorf("spec %s: SLO %s: objective %g is outside (0, 100)", path, o.Name, o.Objective)
		}
		spec.SLOs = append(spec.SLOs, SLO{Name: o.Name, Budget: 1 - o.Objective/100,
			ErrorQuery: o.SLI.Events.ErrorQuery, TotalQuery: o.SLI.Events.TotalQuery})
	}
	if len(spec.SLOs) == 0 {
		return Spec{}, fmt.Errorf("spec %s: no SLOs", path)
	}
	return spec, nil
}

// SLO finds one by name.
func (s Spec) SLO(name string) (SLO, error) {
	for _, o := range s.SLOs {
		if o.Name == name {
			return o, nil
		}
	}
	return SLO{}, fmt.Errorf("spec %s has no SLO %q", s.Path, name)
}

// Sloth generates the spec's rules for the window table with Sloth's CLI
// at bin (the pinned one `make rules` runs), and keeps what the alerts of
// the named SLO evaluate: its SLI recordings and its alerts. Sloth v0.16's
// Go library cannot be linked here: it calls promql/parser.ParseExpr,
// which the pinned Prometheus's packages no longer have. The meta
// recordings (objective, period burn) page nobody, and the period window's
// recording reads 30 days of them; both are left out, as are annotations,
// which only template the notification.
func (s Spec) Sloth(ctx context.Context, bin string, w Windows, slo string) ([]rulefmt.RuleGroup, error) {
	dir, err := os.MkdirTemp("", "sloth-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "rules.yml")
	args := []string{"generate", "-i", s.Path, "-o", out}
	if w.Dir != "" {
		args = append(args, "--slo-period-windows-path="+w.Dir, "--default-slo-period="+dur(w.Period))
	}
	if msg, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sloth %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(msg))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("sloth: %w", err)
	}
	// As make rules does: each pair guarded against too little traffic.
	specText, err := os.ReadFile(s.Path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if b, err = guard.Append(b, specText); err != nil {
		return nil, err
	}
	rgs, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	if len(errs) > 0 {
		return nil, fmt.Errorf("sloth's rules: %w", errs[0])
	}
	period := dur(w.Period)
	suffix := "-" + s.Service + "-" + slo
	var keep []rulefmt.RuleGroup
	for _, g := range rgs.Groups {
		if !strings.HasSuffix(g.Name, suffix) || strings.Contains(g.Name, "-meta-recordings-") {
			continue
		}
		var rs []rulefmt.Rule
		for _, r := range g.Rules {
			if r.Record != "" && r.Labels["sloth_window"] == period {
				continue
			}
			r.Annotations = nil
			rs = append(rs, r)
		}
		g.Rules = rs
		keep = append(keep, g)
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("sloth generated no rules for SLO %q", slo)
	}
	return keep, nil
}
