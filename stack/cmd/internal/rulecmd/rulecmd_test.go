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
