// Package targets says which processes a page is about: a pager config
// maps an alert's labels to the processes to profile, found through
// Prometheus's own service discovery (its active scrape targets, read with
// client_golang's API client), or listed by URL. The pager then profiles
// every one of them (Fetch) and merges what it got.
//
// A rule is a matcher on the alert's labels and the processes it names:
// the scrape jobs whose active targets are the processes (each profiled on
// the host Prometheus scrapes, at the rule's pprof port and path), or
// static URLs. The first rule whose matcher holds takes the alert, as an
// Alertmanager route does; an alert no rule takes is profiled nowhere, and
// its incident says so, rather than getting another service's profile.
package targets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is a checked pager config: its rules in the order they are tried.
type Config struct {
	Rules []Rule `yaml:"rules"`
	// file is where it was read from, for the incidents' errors.
	file string
}

// Rule maps the alerts its matcher takes to the processes to profile.
type Rule struct {
	// Name names the rule in errors, logs and on the page.
	Name string `yaml:"name"`
	// Match holds when every label it lists has the value it gives on the
	// alert (an empty value: the label is absent). An empty Match takes
	// every alert, so it can only be the last rule.
	Match map[string]string `yaml:"match"`
	// Jobs are Prometheus scrape jobs: every active target of theirs is
	// a process of the rule's.
	Jobs []string `yaml:"jobs"`
	// Static lists profile URLs instead: the one-process case, and a
	// pager with no Prometheus.
	Static []string `yaml:"static"`
	// Port and Path are where a discovered target serves its heap
	// profile: on the host Prometheus scrapes, at this port (default: the
	// scrape's own) and path (default /debug/pprof/allocs). PortLabel
	// names a target label (or a discovered one, e.g. a Kubernetes pod
	// annotation's __meta_kubernetes_pod_annotation_profiles_grafana_com_memory_port)
	// whose value, where a target has it, is its port instead.
	Port      int    `yaml:"port"`
	PortLabel string `yaml:"port_label"`
	Path      string `yaml:"path"`
	// MaxTargets bounds the processes one page profiles (default
	// DefaultMaxTargets): a job of thousands is refused on the incident,
	// not fetched a thousand times.
	MaxTargets int `yaml:"max_targets"`
	// Concurrency bounds the rule's fetches in flight (default
	// DefaultConcurrency).
	Concurrency int `yaml:"concurrency"`
	// GCJob is the Prometheus job whose garbage collector a page's facts
	// read (default: the rule's job, when it has one).
	GCJob string `yaml:"gc_job"`
	// TraceURL is a flight-recorder snapshot to take with the profile.
	TraceURL string `yaml:"trace_url"`
	// Profiles are the kinds a page takes beside the heap (Kinds: cpu,
	// goroutine, mutex, block), each from every process, at the heap
	// profile's path with its last element the kind's (/debug/pprof/…).
	// The heap is always taken, first, as the write-up reads it.
	Profiles []string `yaml:"profiles"`
	// CPUSeconds is how long a cpu profile samples (default
	// DefaultCPUSeconds): the capture waits that long for it.
	CPUSeconds int `yaml:"cpu_seconds"`
	// Sampled says the pager keeps rolling delta heap profiles of this
	// rule's processes (every one, merged, as a page's profile is), so
	// its pages get the heap's change and growth; a page of any other rule
	// says it has none.
	Sampled bool `yaml:"sampled"`

	line int // where the rule begins in its file
}

// Defaults of a rule.
const (
	DefaultPath        = "/debug/pprof/allocs"
	DefaultMaxTargets  = 32
	DefaultConcurrency = 4
	DefaultCPUSeconds  = 10
)

// DefaultRule names the flags' one rule.
const DefaultRule = "default"

// Default is the config the pager's flags make when no file is given: one
// rule that takes every alert and profiles profileURL, as the pager always
// did. An empty profileURL makes no rule: no alert is profiled.
func Default(profileURL, traceURL, gcJob string) Config {
	if profileURL == "" {
		return Config{file: "the pager's flags"}
	}
	r := Rule{Name: DefaultRule, Static: []string{profileURL}, TraceURL: traceURL, GCJob: gcJob, Sampled: true}
	r.defaults()
	return Config{Rules: []Rule{r}, file: "the pager's flags"}
}

// Load reads and checks the config file at path.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("pager config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("pager config: %w", err)
	}
	return Parse(data, path)
}

// maxConfigBytes bounds a config file: a few rules per service fit in
// kilobytes.
const maxConfigBytes = 1 << 20

// Parse decodes and checks a config strictly: an unknown field, a second
// document, a rule that names no process or can never match, each is an
// error that names the file, the line and the field. The decoder's
// mistakes are reported together; once the file decodes, every rule's.
func Parse(data []byte, file string) (Config, error) {
	if len(data) > maxConfigBytes {
		return Config{}, fmt.Errorf("%s: over %d bytes", file, maxConfigBytes)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("%s: empty: want a `rules:` list", file)
		}
		return Config{}, fmt.Errorf("%s: %w", file, err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s: more than one YAML document: want one", file)
	}
	cfg := Config{file: file}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&cfg); err != nil {
		return Config{}, decodeError(file, err)
	}
	places := rulePlaces(&doc)
	var errs []error
	// The decoder drops an empty item of the list (`- ` or `- ~`) from
	// the rules, so the places that follow it would be the wrong rule's:
	// it is refused, and the places are the rules' own.
	kept := places[:0]
	for i, p := range places {
		if p.empty {
			errs = append(errs, fmt.Errorf("%s:%d: rule %d: empty; want a rule's fields, or no item", file, p.line, i+1))
			continue
		}
		p.item = i + 1
		kept = append(kept, p)
	}
	places = kept
	if len(cfg.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%s: no rules: want at least one under `rules:`", file))
	}
	names := map[string]int{}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		var fields map[string]int
		item := i + 1
		if i < len(places) {
			r.line, fields, item = places[i].line, places[i].fields, places[i].item
		}
		// Each mistake is told at its field's line, or at the rule's
		// when the field is not written (a missing name, no jobs).
		at := func(field string) string {
			line, ok := fields[field]
			if !ok {
				line = r.line
			}
			return fmt.Sprintf("%s:%d: rule %d (%q): %s", file, line, item, r.Name, field)
		}
		for _, m := range r.check() {
			errs = append(errs, fmt.Errorf("%s: %s", at(m.field), m.says))
		}
		if first, ok := names[r.Name]; ok && r.Name != "" {
			errs = append(errs, fmt.Errorf("%s: the name of rule %d too; want names of their own", at("name"), first))
		}
		names[r.Name] = item
		if len(r.Match) == 0 && i < len(cfg.Rules)-1 {
			errs = append(errs, fmt.Errorf("%s: empty, so it takes every alert and the %d rules after it can never match; put it last", at("match"), len(cfg.Rules)-1-i))
		}
		r.defaults()
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// place is where a rule and each of its fields begin in its file.
type place struct {
	line   int
	fields map[string]int
	empty  bool // a null item, which the decoder leaves out of the rules
	item   int  // its place in the list, counting such items too
}

// rulePlaces are the places of the document's rules, in order.
func rulePlaces(doc *yaml.Node) []place {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "rules" && m.Content[i+1].Kind == yaml.SequenceNode {
			var out []place
			for _, n := range m.Content[i+1].Content {
				p := place{line: n.Line, fields: map[string]int{}, empty: n.Kind == yaml.ScalarNode && n.Tag == "!!null"}
				for j := 0; j+1 < len(n.Content); j += 2 {
					p.fields[n.Content[j].Value] = n.Content[j].Line
				}
				out = append(out, p)
			}
			return out
		}
	}
	return nil
}

// unknownField is the decoder's word for a field the config does not have.
var unknownField = regexp.MustCompile(`(?s)^line (\d+): field (.*) not found in type targets\.(Config|Rule)$`)

// decodeError says the decoder's mistakes each on its own line, as
// file:line: what, in the config's words rather than the Go types'.
func decodeError(file string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", file, err)
	}
	errs := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			where, fields := "a rule", ruleFields()
			if m[3] == "Config" {
				where, fields = "the file", "rules"
			}
			errs = append(errs, fmt.Errorf("%s:%s: %s: not a field of %s; want one of %s", file, m[1], m[2], where, fields))
			continue
		}
		line, says, ok := strings.Cut(strings.TrimPrefix(e, "line "), ": ")
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", file, e))
			continue
		}
		errs = append(errs, fmt.Errorf("%s:%s: %s", file, line, says))
	}
	return errors.Join(errs...)
}

// ruleFields lists a rule's fields as the file spells them.
func ruleFields() string {
	var names []string
	for f := range reflect.TypeFor[Rule]().Fields() {
		if tag := f.Tag.Get("yaml"); tag != "" {
			names = append(names, tag)
		}
	}
	return strings.Join(names, ", ")
}

// labelName is a Prometheus label name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// mistake is one thing wrong with a rule: the field it is in, and what.
type mistake struct{ field, says string }

// check says what is wrong with a rule as written, field by field.
func (r *Rule) check() []mistake {
	var errs []mistake
	bad := func(field, format string, args ...any) {
		errs = append(errs, mistake{field, fmt.Sprintf(format, args...)})
	}
	if r.Name == "" {
		bad("name", "missing: every rule needs one")
	}
	for k := range r.Match {
		if !labelName.MatchString(k) {
			bad("match", "%q is not a label name", k)
		}
	}
	switch {
	case len(r.Jobs) == 0 && len(r.Static) == 0:
		bad("jobs", "neither jobs nor static: the rule names no process to profile")
	case len(r.Jobs) > 0 && len(r.Static) > 0:
		bad("static", "and jobs both: want one way to find the processes")
	}
	for _, j := range r.Jobs {
		if strings.TrimSpace(j) == "" {
			bad("jobs", "an empty job name")
		}
	}
	for _, s := range r.Static {
		if err := checkURL(s); err != nil {
			bad("static", "%v", err)
		}
	}
	if r.TraceURL != "" {
		if err := checkURL(r.TraceURL); err != nil {
			bad("trace_url", "%v", err)
		}
	}
	if r.Port < 0 || r.Port > 65535 {
		bad("port", "%d is no TCP port", r.Port)
	}
	if r.PortLabel != "" && !labelName.MatchString(r.PortLabel) {
		bad("port_label", "%q is not a label name", r.PortLabel)
	}
	if len(r.Static) > 0 && (r.Port != 0 || r.PortLabel != "" || r.Path != "") {
		bad("port", "port, port_label and path are for jobs' targets; a static URL has its own")
	}
	if u, err := url.Parse(r.Path); r.Path != "" && (err != nil || !strings.HasPrefix(r.Path, "/") || u.Host != "" || u.Fragment != "") {
		bad("path", "%q: want an absolute path, e.g. %s", r.Path, DefaultPath)
	}
	if r.MaxTargets < 0 || r.MaxTargets > 1000 {
		bad("max_targets", "%d: want 1 to 1000 (0: %d)", r.MaxTargets, DefaultMaxTargets)
	}
	// Each fetch in flight may read 64 MiB and inflate as much.
	if r.Concurrency < 0 || r.Concurrency > 16 {
		bad("concurrency", "%d: want 1 to 16 (0: %d)", r.Concurrency, DefaultConcurrency)
	}
	seen := map[string]bool{}
	for _, k := range r.Profiles {
		switch _, ok := Kinds[k]; {
		case !ok || k == Heap.Name:
			bad("profiles", "%q: want some of %s (the heap is always taken)", k, strings.Join(ExtraKinds(), ", "))
		case seen[k]:
			bad("profiles", "%q twice", k)
		}
		seen[k] = true
	}
	if r.CPUSeconds < 0 || r.CPUSeconds > 60 {
		bad("cpu_seconds", "%d: want 1 to 60 (0: %d)", r.CPUSeconds, DefaultCPUSeconds)
	}
	if len(r.Static) > DefaultMaxTargets && r.MaxTargets == 0 || r.MaxTargets > 0 && len(r.Static) > r.MaxTargets {
		bad("static", "%d URLs, over max_targets", len(r.Static))
	}
	return errs
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL", s)
	}
	return nil
}

// defaults fills what a checked rule left out.
func (r *Rule) defaults() {
	if r.Path == "" {
		r.Path = DefaultPath
	}
	if r.MaxTargets == 0 {
		r.MaxTargets = DefaultMaxTargets
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	if r.CPUSeconds == 0 {
		r.CPUSeconds = DefaultCPUSeconds
	}
	if r.GCJob == "" && len(r.Jobs) == 1 {
		r.GCJob = r.Jobs[0]
	}
	r.Jobs = slices.Compact(slices.Sorted(slices.Values(r.Jobs)))
}

// File is where the config came from.
func (c Config) File() string { return c.file }

// NeedsPrometheus says whether a rule finds its processes through
// Prometheus.
func (c Config) NeedsPrometheus() bool {
	return slices.ContainsFunc(c.Rules, func(r Rule) bool { return len(r.Jobs) > 0 })
}

// Match returns the first rule that takes an alert with these labels.
func (c Config) Match(labels map[string]string) (*Rule, error) {
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.matches(labels) {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no rule of %s takes this alert (%s): nothing is profiled rather than another service's process", c.file, describe(labels))
}

func (r *Rule) matches(labels map[string]string) bool {
	for k, v := range r.Match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// describe names an alert by the labels a rule would match on, bounded.
func describe(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	var parts []string
	for _, k := range keys[:min(len(keys), 8)] {
		parts = append(parts, fmt.Sprintf("%s=%.40q", k, labels[k]))
	}
	if len(keys) > 8 {
		parts = append(parts, fmt.Sprintf("and %d more", len(keys)-8))
	}
	return strings.Join(parts, ", ")
}
