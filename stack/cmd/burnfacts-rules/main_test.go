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
	b, err := os.ReadFile("../../burnfacts/testdata/sloth.yml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(rules, b, 0o644)
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
		{[]string{"-in", rules}, "already"}, // run twice
	} {
		if err := run(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
