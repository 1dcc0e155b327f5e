package contracts

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"burnlab/shared/slo"
)

// spec is the part of a Sloth prometheus/v1 spec the SLO numbers live in.
type spec struct {
	SLOs []struct {
		Name      string  `yaml:"name"`
		Objective float64 `yaml:"objective"`
		SLI       struct {
			Events struct {
				ErrorQuery string `yaml:"error_query"`
			} `yaml:"events"`
		} `yaml:"sli"`
	} `yaml:"slos"`
}

// The Sloth spec, which every rule comes from, states each SLO's objective
// and threshold a second time; the code's are the ones in shared/slo. They
// must agree, or the page would fire on a threshold the gateway's histogram,
// the calibration and the dashboard do not know.
func TestTheSlothSpecStatesSharedSLONumbers(t *testing.T) {
	le := func(seconds float64) string { return `le="` + strconv.FormatFloat(seconds, 'g', -1, 64) + `"` }
	for file, want := range map[string]map[string]number{
		"llm-gateway.yml": {
			"stream-latency": {slo.Objective, le(slo.Threshold.Seconds())},
			"availability":   {slo.Objective, ""},
			"ttft":           {slo.TTFTObjective, le(slo.TTFTThreshold.Seconds())},
		},
		"llm-provider.yml": {
			"completion-latency": {slo.CompletionObjective, le(slo.CompletionThreshold.Seconds())},
		},
	} {
		t.Run(file, func(t *testing.T) { specStates(t, file, want) })
	}
}

// number is an SLO's objective and the bucket bound its error query
// counts against ("" for none).
type number struct {
	objective float64
	le        string
}

// specStates holds one spec file to the numbers of shared/slo.
func specStates(t *testing.T, file string, want map[string]number) {
	b, err := os.ReadFile(filepath.Join("..", "..", "prometheus", "slo", file))
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := yaml.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, got := range s.SLOs {
		w, ok := want[got.Name]
		if !ok {
			t.Errorf("the spec has an SLO %q that shared/slo does not know", got.Name)
			continue
		}
		seen[got.Name] = true
		if fmt.Sprintf("%.4f", got.Objective/100) != fmt.Sprintf("%.4f", w.objective) {
			t.Errorf("%s: the spec's objective is %v %%, shared/slo's %v", got.Name, got.Objective, w.objective)
		}
		q := got.SLI.Events.ErrorQuery
		if w.le != "" && !strings.Contains(q, w.le) {
			t.Errorf("%s: the spec's error query does not count against %s:\n%s", got.Name, w.le, q)
		}
		if w.le == "" && strings.Contains(q, "le=") {
			t.Errorf("%s: an availability SLI with a latency bound:\n%s", got.Name, q)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the spec has no %s SLO", name)
		}
	}
}
