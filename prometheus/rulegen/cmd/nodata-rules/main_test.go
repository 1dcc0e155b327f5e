package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunTwiceIsAClearError(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "slo.yml")
	b, err := os.ReadFile("../../../../prometheus/rules/slo-lab.yml")
	if err != nil {
		t.Fatal(err)
	}
	sloth, _, _ := strings.Cut(string(b), "# Appended by")
	os.WriteFile(rules, []byte(sloth), 0o644)
	if err := run([]string{"-in", rules}); err != nil {
		t.Fatalf("Sloth's file: %v", err)
	}
	// rulecmd's test covers the flags; a second run is this step's to refuse.
	if err := run([]string{"-in", rules}); err == nil || !strings.Contains(err.Error(), "already has group") {
		t.Errorf("run twice: %v, want an error saying %q", err, "already has group")
	}
}
