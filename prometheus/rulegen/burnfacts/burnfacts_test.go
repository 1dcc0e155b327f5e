package burnfacts

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"burnlab/prometheus/rulegen/guard"
	"burnlab/shared/slo"
)

const pageExpr = `(
    max(slo:sli_error:ratio_rate30s{sloth_id="svc-x", sloth_service="svc", sloth_slo="x"} > (14.4 * 0.001)) without (sloth_window)
    and
    max(slo:sli_error:ratio_rate1m{sloth_id="svc-x", sloth_service="svc", sloth_slo="x"} > (14.4 * 0.001)) without (sloth_window)
)
or
(
    max(slo:sli_error:ratio_rate2m{sloth_id="svc-x", sloth_service="svc", sloth_slo="x"} > (6 * 0.001)) without (sloth_window)
    and
    max(slo:sli_error:ratio_rate4m{sloth_id="svc-x", sloth_service="svc", sloth_slo="x"} > (6 * 0.001)) without (sloth_window)
)
`

func TestParseReadsSlothsPairs(t *testing.T) {
	a, err := Parse("X", pageExpr)
	if err != nil {
		t.Fatal(err)
	}
	want := []slo.Pair{{Short: 30 * time.Second, Long: time.Minute, Factor: 14.4}, {Short: 2 * time.Minute, Long: 4 * time.Minute, Factor: 6}}
	if a.ID != "svc-x" || a.Budget != "0.001" || len(a.Pairs) != 2 || a.Pairs[0] != want[0] || a.Pairs[1] != want[1] {
		t.Fatalf("Parse = %+v, want svc-x, 0.001, %v", a, want)
	}
	if got := slo.FormatPairs(a.Pairs); got != "30s/1m over 14.4x; 2m/4m over 6x" {
		t.Errorf("burn_windows = %q", got)
	}
	back, err := slo.ParsePairs(slo.FormatPairs(a.Pairs))
	if err != nil || len(back) != 2 || back[0] != want[0] || back[1] != want[1] {
		t.Errorf("ParsePairs(FormatPairs) = %v, %v", back, err)
	}
}

// An expression that is not Sloth's shape is refused, not half read: the
// annotation would state the burn of the wrong windows.
func TestParseRefusesWhatIsNotSlothsShape(t *testing.T) {
	for name, expr := range map[string]string{
		"no terms":       `sum(rate(x[5m])) > 1`,
		"odd terms":      strings.SplitAfter(pageExpr, "without (sloth_window)")[0],
		"an extra guard": pageExpr + " unless on() vector(1)",
		"mixed factors":  strings.Replace(pageExpr, "(6 * 0.001)", "(7 * 0.001)", 1),
		"two SLOs":       strings.Replace(pageExpr, `ratio_rate1m{sloth_id="svc-x"`, `ratio_rate1m{sloth_id="svc-y"`, 1),
	} {
		if _, err := Parse("X", expr); err == nil {
			t.Errorf("%s: Parse took it", name)
		}
	}
}

// The templates must be ones Prometheus can parse; promtool's suites in
// prometheus/tests expand them against data (make check-rules).
func TestAnnotationsAreTemplatesOfEachPair(t *testing.T) {
	a, err := Parse("X", pageExpr)
	if err != nil {
		t.Fatal(err)
	}
	ann := a.Annotations(10 * time.Hour)
	for _, w := range []string{"30s", "1m", "2m", "4m"} {
		if !strings.Contains(ann["burn_rate"], "slo:sli_error:ratio_rate"+w+`{sloth_id="svc-x"} / 0.001`) {
			t.Errorf("burn_rate does not read the %s window: %s", w, ann["burn_rate"])
		}
	}
	// A float, never an int: text/template refuses to compare a sample's
	// float64 with 6.
	if !strings.Contains(ann["burn_rate"], "(gt $s1 6.0)") || strings.Contains(ann["burn_rate"], " 6)") {
		t.Errorf("burn_rate compares with an int: %s", ann["burn_rate"])
	}
	if !strings.Contains(ann["budget"], "of the 10h budget spent") || !strings.Contains(ann["budget"], "* 36000 / %f") {
		t.Errorf("budget does not use the 10h period: %s", ann["budget"])
	}
}

func TestAnnotateKeepsSlothsFileAndAddsToEachAlert(t *testing.T) {
	b, err := os.ReadFile("testdata/sloth.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Annotate(b)
	if err != nil {
		t.Fatal(err)
	}
	// Every line of Sloth's is kept, in order; only annotations are added.
	added := regexp.MustCompile(`^      (budget|burn_rate|burn_windows): `)
	var kept []string
	for _, l := range strings.Split(string(out), "\n") {
		if !added.MatchString(l) {
			kept = append(kept, l)
		}
	}
	if strings.Join(kept, "\n") != string(b) {
		t.Errorf("Annotate changed Sloth's lines:\n%s", out)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(out, &f); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if r.Annotations["burn_windows"] == "" || r.Annotations["burn_rate"] == "" || r.Annotations["budget"] == "" || r.Annotations["summary"] != "s" {
				t.Errorf("alert %s: annotations %v", r.Alert, r.Annotations)
			}
		}
	}
	if alerts != 2 {
		t.Errorf("%d alerts annotated, want 2", alerts)
	}
	if _, err := Annotate(out); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("annotating twice: %v, want a refusal", err)
	}
	if _, err := Annotate([]byte("groups: []\n")); err == nil {
		t.Error("a file without Sloth's period recording was taken")
	}
}

// The committed rule files are Sloth's output annotated here (make
// check-rules compares whole files with a regeneration): every alert but
// the appended no-data one carries the three annotations, and its windows
// are the ones its expression checks.
func TestTheCommittedRulesCarryTheFacts(t *testing.T) {
	for w, pairs := range map[string]string{
		"lab":        "30s/1m over 14.4x; 2m/4m over 6x",
		"production": "5m/1h over 14.4x; 30m/6h over 6x",
	} {
		b, err := os.ReadFile("../../../prometheus/rules/slo-" + w + ".yml")
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Groups []struct {
				Rules []struct {
					Alert       string
					Labels      map[string]string
					Annotations map[string]string
				}
			}
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		pages := 0
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" || r.Alert == "SLOSLINoData" {
					continue
				}
				if r.Labels["severity"] == "page" {
					pages++
					if r.Annotations["burn_windows"] != pairs {
						t.Errorf("%s: %s page checks %q, want %q", w, r.Alert, r.Annotations["burn_windows"], pairs)
					}
				}
				if r.Annotations["burn_rate"] == "" || r.Annotations["budget"] == "" {
					t.Errorf("%s: %s lacks burn_rate or budget: run make rules", w, r.Alert)
				}
			}
		}
		// The gateway's three SLOs and the provider's one, joined into the
		// file's one document (prometheus/rulegen/join).
		if pages != 4 {
			t.Errorf("%s: %d page alerts, want 4", w, pages)
		}
	}
}

// A guarded pair (prometheus/rulegen/guard) fires only when its long window holds the
// guard's least events, so the annotations say that pair fired only then.
func TestParseReadsTheGuards(t *testing.T) {
	guarded := pageExpr
	for _, p := range []struct{ long, factor string }{{"1m", "14.4"}, {"4m", "6"}} {
		term := "max(slo:sli_error:ratio_rate" + p.long + `{sloth_id="svc-x", sloth_service="svc", sloth_slo="x"} > (` + p.factor + " * 0.001)) without (sloth_window)"
		guarded = strings.Replace(guarded, term, term+"\n    and on(sloth_id)\n    "+guard.Term("svc-x", map[string]time.Duration{"1m": time.Minute, "4m": 4 * time.Minute}[p.long], map[string]float64{"14.4": 14.4, "6": 6}[p.factor], "0.001"), 1)
	}
	a, err := Parse("X", guarded)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Guarded || len(a.Pairs) != 2 {
		t.Fatalf("Parse = %+v, want both pairs guarded", a)
	}
	ann := a.Annotations(10 * time.Hour)
	// The budget names the pair that fired but the last, its default.
	for want, in := range map[string][]string{
		"{{ with query `slo:sli_events:increase4m{sloth_id=\"svc-x\"}` }}{{ $n1 = . | first | value }}": {"burn_rate", "budget"},
		"(gt $s0 14.4) (gt $l0 14.4) (ge $n0 69.44444444444444)":                                        {"burn_rate", "budget"},
		"(gt $s1 6.0) (gt $l1 6.0) (ge $n1 166.66666666666666)":                                         {"burn_rate"},
	} {
		for _, k := range in {
			if !strings.Contains(ann[k], want) {
				t.Errorf("%s lacks %q:\n%s", k, want, ann[k])
			}
		}
	}
	if a, _ := Parse("X", pageExpr); a.Guarded || strings.Contains(a.Annotations(time.Hour)["burn_rate"], "$n0") {
		t.Error("an unguarded alert reads guards")
	}
	for name, expr := range map[string]string{
		"one guard of two": strings.Replace(guarded, `increase4m{sloth_id="svc-x"} >= (1 / (6 * 0.001))`, "", 1),
		"a guard's window": strings.Replace(guarded, `increase4m{sloth_id`, `increase2m{sloth_id`, 1),
		"a guard's factor": strings.Replace(guarded, `(1 / (6 * 0.001))`, `(1 / (3 * 0.001))`, 1),
	} {
		if _, err := Parse("X", expr); err == nil {
			t.Errorf("%s: Parse took it", name)
		}
	}
}
