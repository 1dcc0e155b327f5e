package guard

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each pair gets its guard over its own long window and factor, every
// line of Sloth's is kept, and the events each guard reads are recorded
// from the spec's total query.
func TestAppendGuardsEachPair(t *testing.T) {
	sloth, spec := read(t, "sloth.yml"), read(t, "spec.yml")
	out, err := Append(sloth, spec)
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		"ratio_rate1m{sloth_id=\"svc-x\", sloth_service=\"svc\", sloth_slo=\"x\"} > (14.4 * 0.001)) without (sloth_window)\n" +
			"          and on(sloth_id)\n          slo:sli_events:increase1m{sloth_id=\"svc-x\"} >= (1 / (14.4 * 0.001))\n",
		"ratio_rate16m{sloth_id=\"svc-x\", sloth_service=\"svc\", sloth_slo=\"x\"} > (3 * 0.001)) without (sloth_window)\n" +
			"          and on(sloth_id)\n          slo:sli_events:increase16m{sloth_id=\"svc-x\"} >= (1 / (3 * 0.001))\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no guard %q in:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "and on(sloth_id)"); n != 2 {
		t.Errorf("%d guards, want one for each of the 2 pairs", n)
	}
	guardLine := regexp.MustCompile(`(?m)^\s*(and on\(sloth_id\)|slo:sli_events:increase\S+ >= .*)\n`)
	if head, _, _ := strings.Cut(guardLine.ReplaceAllString(text, ""), "# Appended by"); head != string(sloth) {
		t.Errorf("Sloth's lines changed:\n%s", head)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Record, Expr string
				Labels       map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(out, &f); err != nil {
		t.Fatal(err)
	}
	last := f.Groups[len(f.Groups)-1]
	if last.Name != GroupPrefix+"svc-x" || len(last.Rules) != 2 {
		t.Fatalf("last group %s with %d rules, want %ssvc-x with the 1m and 16m windows", last.Name, len(last.Rules), GroupPrefix)
	}
	r := last.Rules[1]
	if r.Record != "slo:sli_events:increase16m" || strings.TrimSpace(r.Expr) != "(sum(rate(all_total[16m]))) * 960" ||
		r.Labels["sloth_id"] != "svc-x" || r.Labels["sloth_slo"] != "x" || r.Labels["sloth_window"] != "16m" {
		t.Errorf("recording %+v, want the events of the SLI's total query over 16m", r)
	}
}

func TestAppendRefuses(t *testing.T) {
	sloth, spec := read(t, "sloth.yml"), read(t, "spec.yml")
	guarded, err := Append(sloth, spec)
	if err != nil {
		t.Fatal(err)
	}
	oneTerm := regexp.MustCompile(`(?m)^.*ratio_rate1m.*\n`).ReplaceAllString(string(sloth), "")
	for name, c := range map[string]struct{ sloth, spec, want string }{
		"guarded twice":  {string(guarded), string(spec), "guarded already"},
		"another SLO":    {string(sloth), strings.Replace(string(spec), `"x"`, `"y"`, 1), "the Sloth spec lacks"},
		"no total query": {string(sloth), strings.Replace(string(spec), "total_query", "other_query", 1), "no events SLI"},
		"half a pair":    {oneTerm, string(spec), "want pairs"},
		"two SLOs":       {strings.Replace(string(sloth), `ratio_rate1m{sloth_id="svc-x"`, `ratio_rate1m{sloth_id="svc-y"`, 1), string(spec), "two SLOs"},
		"no spec":        {string(sloth), "[", "reading the Sloth spec"},
	} {
		if _, err := Append([]byte(c.sloth), []byte(c.spec)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestMinEventsLetsOneBadEventNotFire(t *testing.T) {
	for _, f := range []float64{14.4, 6, 3, 1} {
		n := MinEvents(f, 0.001)
		if 1/n > f*0.001 {
			t.Errorf("factor %g: one bad event in %g events is over the factor", f, n)
		}
		if 2/n <= f*0.001 {
			t.Errorf("factor %g: two bad events in %g events are not over the factor", f, n)
		}
	}
}
