package nodata

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The promtool suites in prometheus/tests evaluate the rule groups in the
// order their group_eval_order gives; a group left out runs after them in map
// order, which changes from run to run. The no-data alert reads a recording
// made at the same timestamp, and Prometheus's lookback excludes the sample
// one evaluation interval back, so an alert evaluated before its recording
// sees it absent: a suite that leaves a group out passes or fails by chance.
// This test makes that a certain failure instead.

type suiteRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string            `yaml:"record"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type suite struct {
	RuleFiles      []string `yaml:"rule_files"`
	GroupEvalOrder []string `yaml:"group_eval_order"`
}

func TestSuitesOrderEveryGroupAfterWhatItReads(t *testing.T) {
	paths, err := filepath.Glob("../../tests/*.test.yml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no promtool suites under ../../tests: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var s suite
			readYAML(t, path, &s)
			if len(s.RuleFiles) == 0 {
				t.Fatal("the suite names no rule file")
			}
			pos := map[string]int{}
			for i, g := range s.GroupEvalOrder {
				pos[g] = i
			}
			for _, rf := range s.RuleFiles {
				var rules suiteRules
				readYAML(t, filepath.Join(filepath.Dir(path), rf), &rules)
				checkOrder(t, rf, rules, pos)
			}
		})
	}
}

// recording is a series a group records: Sloth records one name for every
// SLO, told apart by the sloth_id label.
type recording struct{ name, slothID string }

// checkOrder wants every group of rules in the order, and each after every
// group that records a series its expressions read.
func checkOrder(t *testing.T, file string, rules suiteRules, pos map[string]int) {
	t.Helper()
	recordedBy := map[recording][]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				rec := recording{r.Record, r.Labels["sloth_id"]}
				recordedBy[rec] = append(recordedBy[rec], g.Name)
			}
		}
	}
	for _, g := range rules.Groups {
		at, ok := pos[g.Name]
		if !ok {
			t.Errorf("%s: group %s is not in group_eval_order", file, g.Name)
			continue
		}
		for _, r := range g.Rules {
			for rec, groups := range recordedBy {
				if !reads(r.Expr, rec) {
					continue
				}
				for _, h := range groups {
					if h != g.Name && pos[h] > at {
						t.Errorf("%s: group %s reads %s{sloth_id=%q}, recorded by %s, which is evaluated after it", file, g.Name, rec.name, rec.slothID, h)
					}
				}
			}
		}
	}
}

// reads says whether expr selects the recording: its name, not followed by
// another character of a metric name, and its sloth_id where it has one.
func reads(expr string, rec recording) bool {
	if !regexp.MustCompile(regexp.QuoteMeta(rec.name) + `([^a-zA-Z0-9_:]|$)`).MatchString(expr) {
		return false
	}
	return rec.slothID == "" || strings.Contains(expr, `sloth_id="`+rec.slothID+`"`)
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
