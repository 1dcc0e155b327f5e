package rulecmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "slo.yml")
	if err := os.WriteFile(in, []byte("groups: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	upper := func(b []byte) ([]byte, error) { return []byte(strings.ToUpper(string(b))), nil }
	refuse := func([]byte) ([]byte, error) { return nil, errors.New("refused") }

	out := filepath.Join(dir, "out.yml")
	if err := Run("step", "test", []string{"-in", in, "-out", out}, upper); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "GROUPS: []\n" {
		t.Errorf("-out holds %q, want the transform's output", b)
	}
	if err := Run("step", "test", []string{"-in", in}, upper); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(in); string(b) != "GROUPS: []\n" {
		t.Errorf("without -out, -in holds %q, want it rewritten", b)
	}

	for _, c := range []struct {
		args      []string
		transform func([]byte) ([]byte, error)
		want      string
	}{
		{nil, upper, "step: want -in"},
		{[]string{"-in", in, "extra"}, upper, "no arguments"},
		{[]string{"-in", filepath.Join(dir, "missing.yml")}, upper, "no such file"},
		{[]string{"-in", in, "-out", filepath.Join(dir, "no", "dir.yml")}, upper, "no such file"},
		{[]string{"-in", in}, refuse, in + ": refused"},
	} {
		if err := Run("step", "test", c.args, c.transform); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

func TestRunWithSpec(t *testing.T) {
	dir := t.TempDir()
	in, spec := filepath.Join(dir, "slo.yml"), filepath.Join(dir, "spec.yml")
	if err := os.WriteFile(in, []byte("rules\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte("spec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	join := func(rules, spec []byte) ([]byte, error) { return append(rules, spec...), nil }
	if err := RunWithSpec("step", "test", []string{"-in", in, "-spec", spec}, join); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(in); string(b) != "rules\nspec\n" {
		t.Errorf("-in holds %q, want the rules and the spec the transform saw", b)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-in", in}, "want -spec"},
		{[]string{"-in", in, "-spec", filepath.Join(dir, "missing.yml")}, "no such file"},
	} {
		if err := RunWithSpec("step", "test", c.args, join); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if err := Run("step", "test", []string{"-in", in, "-spec", spec}, func(b []byte) ([]byte, error) { return b, nil }); err == nil {
		t.Error("Run took -spec, which only RunWithSpec has")
	}
}
