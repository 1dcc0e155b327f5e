package results

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A written run names its revision, date and machine, and keeps the body
// as printed; a run without a title, author or date is refused.
func TestWriteHeadsTheRunWithWhereItCameFrom(t *testing.T) {
	root := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	rev, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sub", "run.md")
	date := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	err = Write(path, Run{Title: "A run", By: "`make x SAVE=1`", Root: root, Date: date,
		Machine: []string{"Docker Engine 20.10"}, Notes: []string{"one note"}, Body: "a | b\n1 | 2\n"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"# A run\n", "Written by `make x SAVE=1`", "- revision: " + strings.TrimSpace(string(rev)) + "\n",
		"- date: 2026-12-02 10:00:00 UTC\n", "cores, ", "Docker Engine 20.10\n", "- one note\n", "```\na | b\n1 | 2\n```\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	os.WriteFile(filepath.Join(root, "new"), nil, 0o644)
	exec.Command("git", "-C", root, "add", "new").Run()
	if r := Revision(root); !strings.HasSuffix(r, "-dirty") {
		t.Errorf("revision of a changed tree %q, want -dirty", r)
	}
	// A long run names the revision it built at its start.
	if err := Write(path, Run{Title: "A run", By: "x", Root: root, Revision: "abc1234", Date: date}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "- revision: abc1234\n") {
		t.Errorf("the run's own revision is not the file's:\n%s", b)
	}
	if err := Write(path, Run{Title: "no date", By: "x"}); err == nil {
		t.Error("a run without a date was written")
	}
}

// A results file names files by their place in the repository and never
// by the writing machine's paths: a temporary directory's name says
// nothing to a reader, and the repository's absolute path is the writer's.
func TestWriteLeavesNoMachinePaths(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(t.TempDir(), "run.md")
	body := "flags: -sloth=" + filepath.Join(root, "bin", "sloth") + " -root=" + root + "\n" +
		"lab up in " + filepath.Join(os.TempDir(), "TestScenarios123", "003") + "\n" +
		"a neighbour: " + root + "2/x\n" +
		"inside another path: /x" + root + "/y\n" +
		"(see " + filepath.Join(root, "docs", "a.md") + "), and " + filepath.Join(os.TempDir(), "t", "log") + ": done\n"
	if err := Write(path, Run{Title: "A run", By: "x", Root: root, Date: time.Now(), Body: body}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"flags: -sloth=bin/sloth -root=.\n", "lab up in $TMPDIR/…\n", "a neighbour: $TMPDIR/…\n",
		"inside another path: /x" + root + "/y\n", "(see docs/a.md), and $TMPDIR/…: done\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
}

// The saved results obey the same rule.
func TestSavedResultsHaveNoMachinePaths(t *testing.T) {
	files, err := filepath.Glob("../../docs/results/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no saved results: %v", err)
	}
	abs := regexp.MustCompile(`(^|[\s=(:'"])/(tmp|home|work|root|Users|var|private)/`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if abs.MatchString(line) {
				t.Errorf("%s:%d names a machine path: %s", filepath.Base(f), i+1, line)
			}
		}
	}
}

func TestNoDateIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.md")
	if err := Write(path, Run{Title: "no date", By: "x"}); err == nil {
		t.Error("a run without a date was written")
	}
}

func TestReplaceBlockKeepsTheMarkersAndWhatSurroundsThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	os.WriteFile(path, []byte("top\n<!-- b -->\nold\n<!-- e -->\nbottom\n"), 0o644)
	if err := ReplaceBlock(path, "<!-- b -->", "<!-- e -->", "| new |"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "top\n<!-- b -->\n| new |\n<!-- e -->\nbottom\n" {
		t.Errorf("got %q", b)
	}
	if err := ReplaceBlock(path, "<!-- x -->", "<!-- e -->", "t"); err == nil || !strings.Contains(err.Error(), "lacks the markers") {
		t.Errorf("missing markers: %v", err)
	}
}
