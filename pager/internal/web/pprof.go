package web

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"
	"github.com/rs/zerolog"
)

// pprofViews are the handlers of pprof's web UI that the pager mounts.
// Left out: saveconfig and deleteconfig write pprof's settings file in the
// pager's home (the pages are read-only), and disasm runs objdump on
// whatever local binary the profile's mappings name.
var pprofViews = map[string]bool{
	"/": true, "/top": true, "/graph": true, "/flamegraph": true, "/peek": true, "/source": true,
	"/download": true, "/flamegraph2": true, "/flamegraphold": true,
}

// pprofArgs are the command line every pprof UI of the pager is built
// with. pprof keeps its report settings (the sample index among them) in
// one process-wide config that each build overwrites with its flags, so
// every build passes the same ones. The -http address is never listened
// on: the HTTPServer option takes the handlers instead.
var pprofArgs = []string{"-http=localhost:1", "-no_browser", "-symbolize=none", "-sample_index=alloc_space"}

// buildPProf runs pprof's driver on profiles held in memory, as
// `go tool pprof -http` would on files, and returns its web UI's handlers
// by path ("/flamegraph", "/top", …). args name the profiles (keys of
// profiles) and may carry -diff_base.
func buildPProf(profiles map[string]*profile.Profile, args []string, log zerolog.Logger) (map[string]http.Handler, error) {
	var handlers map[string]http.Handler
	fs := &flagSet{FlagSet: flag.NewFlagSet("pprof", flag.ContinueOnError), args: append(append([]string{}, pprofArgs...), args...)}
	fs.SetOutput(io.Discard)
	err := driver.PProf(&driver.Options{
		Flagset: fs,
		Fetch:   memFetcher(profiles),
		Obj:     noObjects{},
		UI:      logUI{log: log},
		HTTPServer: func(a *driver.HTTPServerArgs) error {
			handlers = a.Handlers
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pprof: %w", err)
	}
	if handlers == nil {
		return nil, errors.New("pprof: no web UI was built")
	}
	return handlers, nil
}

// flagSet is pprof's driver.FlagSet over a flag.FlagSet with its own
// arguments: the driver's default reads the process's command line.
type flagSet struct {
	*flag.FlagSet
	args  []string
	extra string
}

func (f *flagSet) StringList(name, def, usage string) *[]*string {
	return &[]*string{f.String(name, def, usage)}
}

func (f *flagSet) ExtraUsage() string { return f.extra }

func (f *flagSet) AddExtraUsage(eu string) { f.extra += eu }

func (f *flagSet) Parse(usage func()) []string {
	f.Usage = usage
	if err := f.FlagSet.Parse(f.args); err != nil || f.NArg() == 0 {
		return nil
	}
	return f.Args()
}

// memFetcher hands pprof profiles the pager has already read through its
// os.Root, by name, so pprof itself opens no file and fetches nothing. It
// returns no source URL: pprof then saves no copy in $HOME/pprof.
type memFetcher map[string]*profile.Profile

func (m memFetcher) Fetch(src string, _, _ time.Duration) (*profile.Profile, string, error) {
	p, ok := m[src]
	if !ok {
		return nil, "", fmt.Errorf("no profile %q", src)
	}
	return p.Copy(), "", nil
}

// noObjects refuses to open binaries: the profiles come symbolized from the
// gateway, and the pager runs no objdump or addr2line on what a profile's
// mappings name.
type noObjects struct{}

func (noObjects) Open(file string, _, _, _ uint64, _ string) (driver.ObjFile, error) {
	return nil, fmt.Errorf("the pager opens no binaries (%s)", file)
}

func (noObjects) Disasm(file string, _, _ uint64, _ bool) ([]driver.Inst, error) {
	return nil, fmt.Errorf("the pager disassembles no binaries (%s)", file)
}

// logUI sends pprof's messages to the pager's log: there is no terminal.
type logUI struct{ log zerolog.Logger }

func (logUI) ReadLine(string) (string, error)     { return "", io.EOF }
func (u logUI) Print(args ...any)                 { u.log.Debug().Msg(fmt.Sprint(args...)) }
func (u logUI) PrintErr(args ...any)              { u.log.Warn().Msg(fmt.Sprint(args...)) }
func (logUI) IsTerminal() bool                    { return false }
func (logUI) WantBrowser() bool                   { return false }
func (logUI) SetAutoComplete(func(string) string) {}

// viewCache keeps the pprof UIs built for incidents: building one parses
// and indexes the profile, too slow to do per request, and each holds its
// profile in memory, so only the max most recently used are kept.
type viewCache struct {
	max     int
	mu      sync.Mutex
	entries map[string]*viewEntry
	order   []string // least recently used first
	buildMu sync.Mutex
	builds  atomic.Int64
}

type viewEntry struct {
	ready    chan struct{}
	handlers map[string]http.Handler
	err      error
}

func newViewCache(max int) *viewCache {
	return &viewCache{max: max, entries: map[string]*viewEntry{}}
}

// get returns key's handlers, building them once however many requests ask
// at the same time. Builds run one at a time: each takes a core while it
// parses. A failed build is not kept, so the next request tries again.
func (c *viewCache) get(ctx context.Context, key string, build func() (map[string]http.Handler, error)) (map[string]http.Handler, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.touch(key)
	if ok {
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.handlers, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e = &viewEntry{ready: make(chan struct{})}
	c.entries[key] = e
	for len(c.order) > c.max {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	c.mu.Unlock()

	c.buildMu.Lock()
	c.builds.Add(1)
	e.handlers, e.err = build()
	c.buildMu.Unlock()
	close(e.ready)
	if e.err != nil {
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key)
			c.remove(key)
		}
		c.mu.Unlock()
	}
	return e.handlers, e.err
}

// touch makes key the most recently used; the caller holds c.mu.
func (c *viewCache) touch(key string) {
	c.remove(key)
	c.order = append(c.order, key)
}

func (c *viewCache) remove(key string) {
	for i, k := range c.order {
		if k == key {
			c.order = append(c.order[:i], c.order[i+1:]...)
			return
		}
	}
}

func (c *viewCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
