package pagerweb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser is one headless Chromium tab that saves a screenshot after each
// step, so a run leaves pictures of what a person would have seen. The
// pager web UI's browser test and the lab's end-to-end test drive it.
type Browser struct {
	ctx    context.Context
	cancel func()
	// Dir is where the screenshots go, one PNG a step, named after it.
	Dir string
}

// Chromium finds Debian's Chromium, which `make tools` installs.
func Chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium: `make tools` installs Debian's chromium")
}

// Open starts Chromium with one tab, which lives until Close or the end of
// ctx; screenshots go to dir.
func Open(ctx context.Context, dir string) (*Browser, error) {
	chrome, err := Chromium()
	if err != nil {
		return nil, err
	}
	// dir is the caller's: a test's temporary directory or the user's
	// BURNLAB_SCREENSHOTS.
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G703: see above
		return nil, fmt.Errorf("screenshots: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	b := &Browser{ctx: bctx, cancel: func() { cancelBrowser(); cancelAlloc() }, Dir: dir}
	// The first run starts the browser, which lives as long as that run's
	// context: so no step timeout on it.
	if err := chromedp.Do(bctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("starting %s: %w", chrome, err)
	}
	return b, nil
}

// Close ends the browser.
func (b *Browser) Close() { b.cancel() }

// Do runs the steps, each within 30 s, and saves a screenshot of where
// they ended as <Dir>/<name>.png, failed or not.
func (b *Browser) Do(name string, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, steps...)
	if png, serr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); serr == nil {
		// name is the caller's own, a step of its test.
		if werr := os.WriteFile(filepath.Join(b.Dir, name+".png"), png, 0o644); werr != nil { //nolint:gosec // G703: see above
			err = errors.Join(err, werr)
		}
	}
	if err != nil {
		where, _ := Eval[string](b, "location.href")
		return fmt.Errorf("%s (at %s): %w", name, where, err)
	}
	return nil
}

// Text is the visible text of the first element matching a CSS selector.
func (b *Browser) Text(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		return "", fmt.Errorf("text of %s: %w", sel, err)
	}
	return strings.TrimSpace(s), nil
}

// Eval evaluates a JavaScript expression in the tab.
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		return v, fmt.Errorf("evaluating %s: %w", expr, err)
	}
	return v, nil
}
