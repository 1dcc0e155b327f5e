package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSavesTheRunWithItsHeader(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run.md")
	err := run([]string{"-o", out, "-title", "A run", "-by", "`make x`", "-note", "first", "-note", "second", "-root", "../../.."},
		strings.NewReader("step  took\ncheck  60\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# A run", "Written by `make x`", "- revision: ", "- machine: ", "- first\n- second\n", "check  60"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the file lacks %q:\n%s", want, b)
		}
	}
}

func TestRefusesWhatItCannotSave(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		args  []string
		stdin string
	}{
		"no -o":       {[]string{"-title", "t", "-by", "b"}, "x"},
		"no -title":   {[]string{"-o", filepath.Join(dir, "a.md"), "-by", "b"}, "x"},
		"empty input": {[]string{"-o", filepath.Join(dir, "b.md"), "-title", "t", "-by", "b"}, " \n"},
		"stray":       {[]string{"-o", filepath.Join(dir, "c.md"), "-title", "t", "-by", "b", "extra"}, "x"},
	} {
		if err := run(c.args, strings.NewReader(c.stdin)); err == nil {
			t.Errorf("%s: saved", name)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files written on refusal: %v", entries)
	}
}
