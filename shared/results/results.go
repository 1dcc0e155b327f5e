// Package results writes a measured run as a Markdown file under
// docs/results, headed by the command that wrote it, the revision, the
// date and the machine, so that a figure the docs quote can be traced to
// its run and measured again, and is never copied by hand.
package results

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// EnvDir is the variable a test reads for the directory to save its run
// in (make's SAVE=1 sets it to docs/results). Unset, a test saves nothing.
const EnvDir = "BURNLAB_RESULTS"

// Run is one measured run.
type Run struct {
	Title string // the file's heading
	By    string // what wrote it, e.g. "`make bench-proxy SAVE=1` (tools/benchproxy/cmd/bench-proxy)"
	Root  string // the repository, whose revision the run measured
	// Revision is the revision measured when it is not Root's as Write
	// runs: a run that builds at its start and lasts an hour may see
	// commits land before it writes (Revision(Root) at its start).
	Revision string
	Date     time.Time
	// Machine holds facts of the machine beyond the ones Write finds
	// itself (cores, CPU, OS, Go), such as a Docker Engine's version.
	Machine []string
	// Notes are lines after the header, each a list item: what a reader
	// needs to read the figures.
	Notes []string
	// Body is the run's own output (a table, a timeline), kept as it was
	// printed.
	Body string
}

// Write writes r to path, creating its directory.
func Write(path string, r Run) error {
	if r.Title == "" || r.By == "" || r.Date.IsZero() {
		return errors.New("results: a run needs a title, what wrote it and a date")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nWritten by %s. Run it again rather than edit this file.\n\n", r.Title, r.By)
	fmt.Fprintf(&b, "- revision: %s\n", cmp.Or(r.Revision, Revision(r.Root)))
	fmt.Fprintf(&b, "- date: %s\n", r.Date.UTC().Format(time.DateTime+" MST"))
	fmt.Fprintf(&b, "- machine: %s\n", strings.Join(append(machine(), r.Machine...), ", "))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if r.Body != "" {
		fmt.Fprintf(&b, "\n```\n%s\n```\n", strings.TrimRight(r.Body, "\n"))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(path, []byte(portable(b.String(), r.Root)), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// portable rewrites the writing machine's own paths in text: the
// repository's become relative to it, and any under the temporary
// directory become $TMPDIR/…, so that a results file reads the same
// whichever checkout wrote it and says nothing of the machine's layout.
func portable(text, root string) string {
	// A path starts a line or follows a space, =, a bracket or a quote;
	// it ends before a space, a quote or punctuation that follows it.
	const before, rest = "(?m)(^|[\\s=(\\[\"'\x60])", "[^\\s\"'\x60),;:]*"
	tmpDir := filepath.Clean(os.TempDir())
	tmp := regexp.MustCompile(before + regexp.QuoteMeta(tmpDir) + "/" + rest)
	if abs, err := filepath.Abs(root); err == nil && abs != "/" {
		if strings.HasPrefix(tmpDir+"/", abs+"/") {
			// A temporary directory inside the repository is still one.
			text = tmp.ReplaceAllString(text, "${1}$$TMPDIR/…")
		}
		q := regexp.QuoteMeta(abs)
		text = regexp.MustCompile(before+q+"/").ReplaceAllString(text, "${1}")
		// The root itself, but not a longer name that starts with it.
		text = regexp.MustCompile(before+q+"([^\\w./-]|$)").ReplaceAllString(text, "${1}.${2}")
	}
	return tmp.ReplaceAllString(text, "${1}$$TMPDIR/…")
}

// Revision names the commit checked out at root, "-dirty" when the work
// tree has changes: a dirty run measured code no commit holds.
func Revision(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	return string(bytes.TrimSpace(out))
}

// machine is what Write says of every machine: cores, CPU model, OS and
// architecture, Go version.
func machine() []string {
	facts := []string{fmt.Sprintf("%d cores", runtime.NumCPU())}
	if model := CPUModel(); model != "" {
		facts = append(facts, model)
	}
	return append(facts, runtime.GOOS+"/"+runtime.GOARCH, runtime.Version())
}

// CPUModel reads the CPU's model name from /proc/cpuinfo; "" where there is
// none (not Linux).
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ReplaceBlock rewrites the text between the markers begin and end of
// the Markdown file at path (a generated table in a doc), keeping the
// markers and everything around them.
func ReplaceBlock(path, begin, end, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	head, rest, ok := strings.Cut(string(b), begin)
	_, tail, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		return fmt.Errorf("results: %s lacks the markers %q and %q", path, begin, end)
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	//nolint:gosec // G703: the path is the caller's own, a file it was asked to rewrite
	return os.WriteFile(path, []byte(head+begin+"\n"+text+end+tail), 0o644)
}
