package lab

import (
	"encoding/json"
	"strings"
	"testing"
)

const storyJSON = `{"id":"x","annotations":{"burn_rate":"2m 9.8x and 4m 8.1x, over 6x","budget":"1.2% of the 10h budget spent over the last 4m 0s, 98.8% left; at the 4m burn (8.1x) it lasts 9h"},
"facts":{"pair":1,"pairs":[{"short":"30s","long":"1m","short_burn":3.1,"long_burn":2.9,"factor":14.4,"fired":false},
{"short":"2m","long":"4m","short_burn":9.8,"long_burn":8.1,"factor":6,"fired":true}],
"budget":{"spent_pct":1.2,"left_pct":98.8,"period":"10h","history":"4m"},
"slowest":[{"request_id":"r1","tenant":"acme","seconds":1.5},{"request_id":"r2","tenant":"globex","seconds":1.2}],
"heap":{"changed":true,"function":"burnlab/gateway/internal/transcript.(*Baseline).Append","words":"transcript.(*Baseline).Append grew"}}}`

const storyLog = `{"level":"info","request_id":"r1","tenant":"acme","duration_ms":1500.2,"message":"stream"}
not json
{"level":"info","request_id":"r2","tenant":"globex","duration_ms":1200,"message":"stream"}
`

// The e2e's story check must be able to fail: each fact broken once.
func TestStoryCheckFailsEachBrokenFact(t *testing.T) {
	read := func(edit func(string) string) Story {
		var s Story
		if err := json.Unmarshal([]byte(edit(storyJSON)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	same := func(s string) string { return s }
	if _, err := read(same).Check("transcript.(*Baseline).Append", storyLog); err != nil {
		t.Fatalf("a whole story: %v", err)
	}
	for name, c := range map[string]struct {
		edit   func(string) string
		guilty string
		log    string
	}{
		"wrong heap verdict":     {same, "", storyLog},
		"other function":         {same, "proxy.(*Handler).record", storyLog},
		"no pair fired":          {func(s string) string { return strings.Replace(s, `"fired":true`, `"fired":false`, 1) }, "transcript.(*Baseline).Append", storyLog},
		"fired under its factor": {func(s string) string { return strings.Replace(s, `"long_burn":8.1`, `"long_burn":5.9`, 1) }, "transcript.(*Baseline).Append", storyLog},
		"annotation of the other pair": {func(s string) string {
			return strings.Replace(s, `2m 9.8x and 4m 8.1x, over 6x`, `30s 3.1x and 1m 2.9x, over 14.4x`, 1)
		}, "transcript.(*Baseline).Append", storyLog},
		"budget not adding up": {func(s string) string { return strings.Replace(s, `"spent_pct":1.2`, `"spent_pct":0`, 1) }, "transcript.(*Baseline).Append", storyLog},
		"budget annotation not adding up": {func(s string) string {
			return strings.Replace(s, `98.8% left`, `1.2% left`, 1)
		}, "transcript.(*Baseline).Append", storyLog},
		"budget annotation and API apart": {func(s string) string {
			return strings.Replace(s, `1.2% of the 10h budget spent over the last 4m 0s, 98.8% left`, `5.0% of the 10h budget spent, 95.0% left`, 1)
		}, "transcript.(*Baseline).Append", storyLog},
		"budget annotation without figures": {func(s string) string {
			return strings.Replace(s, `1.2% of the 10h budget spent over the last 4m 0s, 98.8% left`, `no budget figures in Prometheus yet`, 1)
		}, "transcript.(*Baseline).Append", storyLog},
		"budget over the whole period's": {func(s string) string {
			return strings.NewReplacer(`"spent_pct":1.2`, `"spent_pct":14285.7`, `"left_pct":98.8`, `"left_pct":-14185.7`,
				`1.2% of the 10h`, `14285.7% of the 10h`, `98.8% left`, `-14185.7% left`).Replace(s)
		}, "transcript.(*Baseline).Append", storyLog},
		"a probe's request among the slowest": {func(s string) string { return strings.Replace(s, `"tenant":"globex"`, `"tenant":"calibration"`, 1) },
			"transcript.(*Baseline).Append", strings.Replace(storyLog, `"tenant":"globex"`, `"tenant":"calibration"`, 1)},
		"no budget": {func(s string) string {
			return strings.Replace(s, `"budget":{"spent_pct":1.2,"left_pct":98.8,"period":"10h","history":"4m"},`, ``, 1)
		}, "transcript.(*Baseline).Append", storyLog},
		"a request with no log line":    {same, "transcript.(*Baseline).Append", strings.Replace(storyLog, `"r2"`, `"r3"`, 1)},
		"a request of another tenant":   {same, "transcript.(*Baseline).Append", strings.Replace(storyLog, `"tenant":"globex"`, `"tenant":"acme"`, 1)},
		"a request of another duration": {same, "transcript.(*Baseline).Append", strings.Replace(storyLog, `1500.2`, `900`, 1)},
		"not slowest first":             {func(s string) string { return strings.Replace(s, `"seconds":1.2`, `"seconds":1.9`, 1) }, "transcript.(*Baseline).Append", strings.Replace(storyLog, `1200`, `1900`, 1)},
		"heap not compared": {func(s string) string {
			return strings.Replace(s, `"changed":true`, `"changed":false,"error":"no delta"`, 1)
		}, "", storyLog},
	} {
		if _, err := read(c.edit).Check(c.guilty, c.log); err == nil {
			t.Errorf("%s: Check passed", name)
		}
	}
}

// A page is the write-up's when the pair that fired burns at about 10x:
// the calibration's page at 143x, or one barely over a ticket's factor, is
// not.
func TestStoryBurnIsTheWriteUps(t *testing.T) {
	for edit, ok := range map[[2]string]bool{
		{"", ""}: true,
		{`"short_burn":9.8`, `"short_burn":142.9`}: false,
		{`"long_burn":8.1`, `"long_burn":21`}:      false,
		{`"short_burn":9.8`, `"short_burn":4.9`}:   false,
		{`"long_burn":8.1`, `"long_burn":null`}:    false,
	} {
		var s Story
		if err := json.Unmarshal([]byte(strings.Replace(storyJSON, edit[0], edit[1], 1)), &s); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckBurn(); (err == nil) != ok {
			t.Errorf("fired pair edited %q → %q: CheckBurn = %v, want ok %v", edit[0], edit[1], err, ok)
		}
	}
}

// The GC check must fail a page whose collector did not run flat out, or
// that has no figures.
func TestStoryCheckGC(t *testing.T) {
	for gc, ok := range map[string]bool{
		`{"cpu_share_before":0.04,"cpu_share_during":0.61,"assist_share_before":0.01,"assist_share_during":0.23}`:  true,
		`{"cpu_share_before":0.20,"cpu_share_during":0.35,"assist_share_before":0.01,"assist_share_during":0.13}`:  true,  // an idle "before"
		`{"cpu_share_before":0.01,"cpu_share_during":0.14,"assist_share_before":0.01,"assist_share_during":0.13}`:  false, // under 15 %
		`{"cpu_share_before":0.06,"cpu_share_during":0.21,"assist_share_before":0.02,"assist_share_during":0.054}`: true,  // the flight recorder's lab run
		`{"cpu_share_before":0.20,"cpu_share_during":0.40,"assist_share_before":0.05,"assist_share_during":0.16}`:  true,  // a calibration's "before"
		`{"cpu_share_before":0.04,"cpu_share_during":0.61,"assist_share_before":0.15,"assist_share_during":0.13}`:  false, // assist fell
		`{"cpu_share_before":0.04,"cpu_share_during":0.61,"assist_share_before":0.00,"assist_share_during":0.025}`: false, // under 3 %
		`{"cpu_share_before":null,"cpu_share_during":0.61,"assist_share_before":null,"assist_share_during":0.23}`:  true,  // no before: an idle gateway
		`{"cpu_share_before":0.04,"cpu_share_during":0.61,"assist_share_before":0.01,"assist_share_during":null}`:  false,
		`null`: false,
	} {
		var s Story
		if err := json.Unmarshal([]byte(strings.Replace(storyJSON, `"heap":{`, `"gc":`+gc+`,"heap":{`, 1)), &s); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CheckGC(); (err == nil) != ok {
			t.Errorf("gc %s: %v, want ok %v", gc, err, ok)
		}
	}
}
