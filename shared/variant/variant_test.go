package variant

import "testing"

func TestParse(t *testing.T) {
	for _, v := range All() {
		if got, err := Parse(string(v)); err != nil || got != v {
			t.Errorf("Parse(%q) = %q, %v", v, got, err)
		}
	}
	for _, bad := range []string{"", "Fixed", "fixed ", "optimised"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", bad, got)
		}
	}
	if Baseline.Tags() != "" || Fixed.Tags() != "fixed" {
		t.Errorf("tags: baseline %q, fixed %q", Baseline.Tags(), Fixed.Tags())
	}
}
