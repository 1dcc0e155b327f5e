package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBadInputIsAClearError(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "slo.yml")
	b, err := os.ReadFile("../../../prometheus/rules/slo-lab.yml")
	if err != nil {
		t.Fatal(err)
	}
	sloth, _, _ := strings.Cut(string(b), "# Appended by")
	os.WriteFile(rules, []byte(sloth), 0o644)
	if err := run([]string{"-in", rules}); err != nil {
		t.Fatalf("Sloth's file: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "want -in"},
		{[]string{"-in", rules, "extra"}, "no arguments"},
		{[]string{"-in", filepath.Join(dir, "missing.yml")}, "no such file"},
		{[]string{"-in", rules}, "already has group"}, // run twice
	} {
		if err := run(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
