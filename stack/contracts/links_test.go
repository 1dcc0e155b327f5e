package contracts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is the manual and docs/ holds the rest, so a newcomer finds
// things by following links; a renamed file or heading must not leave one
// pointing nowhere. Every relative link in the repo's Markdown must name a
// file that exists, and a #fragment on a Markdown file must name one of its
// headings, by GitHub's anchor rules.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if len(files) == 0 {
		t.Fatal("git ls-files found no Markdown file")
	}
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(b)
		anchors[path] = a
		return a
	}
	var links int
	for _, rel := range files {
		path := filepath.Join(root, rel)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(b) {
			links++
			target, fragment, _ := strings.Cut(l.target, "#")
			dest := path
			if target != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link to %q: no such file", rel, l.line, l.target)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !headings(dest)[fragment] {
				t.Errorf("%s:%d: link to %q: %s has no heading with anchor #%s", rel, l.line, l.target, filepath.Base(dest), fragment)
			}
		}
	}
	if links == 0 {
		t.Error("found no relative link in any Markdown file: is the link pattern broken?")
	}
}

// markdownFiles lists the Markdown files git would commit: tracked ones and
// new ones not ignored, as tools/standins stages them, so a doc is checked
// before its first commit and nothing under .lab/ or .offline/ (vendored
// modules' READMEs) is.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

type link struct {
	target string
	line   int
}

var (
	// fence opens or closes a fenced code block; nothing inside one is a
	// link or a heading (the README's shell blocks have "# …" comments).
	fence = regexp.MustCompile("^ {0,3}(```|~~~)")
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inlineLink is [text](target) and ![alt](target), with an optional
	// "title"; referenceDef is a "[name]: target" line.
	inlineLink   = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	referenceDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// scheme marks an absolute URL (https:, mailto:), which this test leaves
	// to the reader.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// markdownLinks returns the relative link targets of a Markdown file,
// outside code, with their line numbers.
func markdownLinks(b []byte) []link {
	var links []link
	inFence := false
	for i, line := range strings.Split(string(b), "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := referenceDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if !scheme.MatchString(target) {
				links = append(links, link{target, i + 1})
			}
		}
	}
	return links
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	// linkText keeps a link's text: [text](target) renders as text.
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives a Markdown file's ATX
// headings ("## Title"; burnlab writes no underlined ones): the rendered
// text lowercased, every character but letters, digits, spaces, '-' and '_'
// dropped, spaces turned to '-', and a repeated anchor suffixed -1, -2, ….
func headingAnchors(b []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range bytes.Split(b, []byte("\n")) {
		if fence.Match(line) {
			inFence = !inFence
			continue
		}
		m := atxHeading.FindSubmatch(line)
		if inFence || m == nil {
			continue
		}
		text := linkText.ReplaceAllString(string(m[1]), "$1")
		var a strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
				a.WriteRune(r)
			}
		}
		anchor := a.String()
		if n := seen[anchor]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", anchor, n)] = true
		} else {
			anchors[anchor] = true
		}
		seen[anchor]++
	}
	return anchors
}

// GitHub's rules, on headings this repo has or is likely to have.
func TestHeadingAnchors(t *testing.T) {
	md := "# burnlab\n## The pager's web UI\n### Switching baseline ↔ fixed\n" +
		"## Performance: `make bench-proxy`\n## Fault scenarios: each SLO pages for its own failure\n" +
		"```sh\n# not a heading\n```\n## [Linked](x.md) heading\n## Tests\n## Tests\n"
	got := headingAnchors([]byte(md))
	for _, want := range []string{
		"burnlab", "the-pagers-web-ui", "switching-baseline--fixed",
		"performance-make-bench-proxy", "fault-scenarios-each-slo-pages-for-its-own-failure",
		"linked-heading", "tests", "tests-1",
	} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block was taken for a heading")
	}
}
