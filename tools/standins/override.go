package standins

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A dockerfile is what the override needs from the Dockerfile: its global
// ARGs (those before the first FROM) with their defaults, and each stage's
// base and the stages it copies from.
type dockerfile struct {
	globals map[string]string
	stages  map[string]stage
}

type stage struct {
	base string   // as written: an image, ${ARG} or another stage
	from []string // COPY --from= stages (or images)
}

// argRef is a FROM naming a global ARG: ${GO_IMAGE} or $GO_IMAGE.
var argRef = regexp.MustCompile(`^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$`)

// parseDockerfile reads the instructions the override needs — ARG before
// the first FROM, FROM, and COPY/ADD --from — joining continued lines and
// skipping comments. Everything else is the engine's to read.
func parseDockerfile(b []byte) (dockerfile, error) {
	d := dockerfile{globals: map[string]string{}, stages: map[string]stage{}}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return d, fmt.Errorf("standins: Dockerfile: %w", err)
	}
	current, n := "", 0
	for _, line := range lines {
		words := strings.Fields(line)
		switch strings.ToUpper(words[0]) {
		case "ARG":
			if current != "" {
				continue
			}
			for _, kv := range words[1:] {
				k, v, _ := strings.Cut(kv, "=")
				d.globals[k] = strings.Trim(v, `"'`)
			}
		case "FROM":
			args := slices.DeleteFunc(words[1:], func(w string) bool { return strings.HasPrefix(w, "--") })
			if len(args) != 1 && (len(args) != 3 || !strings.EqualFold(args[1], "AS")) {
				return d, fmt.Errorf("standins: Dockerfile: cannot read %q", line)
			}
			current = strconv.Itoa(n)
			if len(args) == 3 {
				current = strings.ToLower(args[2])
			}
			n++
			d.stages[current] = stage{base: args[0]}
		case "COPY", "ADD":
			for _, w := range words[1:] {
				if from, ok := strings.CutPrefix(w, "--from="); ok && current != "" {
					s := d.stages[current]
					s.from = append(s.from, strings.ToLower(from))
					d.stages[current] = s
				}
			}
		}
	}
	return d, nil
}

// needs returns what building target takes from outside the Dockerfile:
// the global ARGs its stages' bases name, and any image named outright.
func (d dockerfile) needs(target string) (args, images []string, err error) {
	seen := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		if seen[name] {
			return nil
		}
		seen[name] = true
		s, ok := d.stages[name]
		if !ok {
			return fmt.Errorf("standins: the Dockerfile has no stage %q", name)
		}
		for _, ref := range append([]string{s.base}, s.from...) {
			switch m := argRef.FindStringSubmatch(ref); {
			case m != nil:
				if !slices.Contains(args, m[1]) {
					args = append(args, m[1])
				}
			case d.isStage(ref):
				if err := visit(strings.ToLower(ref)); err != nil {
					return err
				}
			default:
				images = append(images, ref)
			}
		}
		return nil
	}
	if err := visit(strings.ToLower(target)); err != nil {
		return nil, nil, err
	}
	slices.Sort(args)
	return args, images, nil
}

func (d dockerfile) isStage(ref string) bool {
	_, ok := d.stages[strings.ToLower(ref)]
	return ok
}

// A composeFile is what the override needs from docker-compose.yml.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build any    `yaml:"build"` // a context path, or a mapping with target
	} `yaml:"services"`
}

// The profile a service with no stand-in gets: never started unless asked
// for by name, which on this engine fails where it would anyway.
const leftOutProfile = "needs-registry"

type overrideFile struct {
	Services map[string]overrideService `yaml:"services"`
}

type overrideService struct {
	Image    string         `yaml:"image,omitempty"`
	Build    *overrideBuild `yaml:"build,omitempty"`
	Profiles []string       `yaml:"profiles,omitempty"`
}

type overrideBuild struct {
	Context string            `yaml:"context"`
	Args    map[string]string `yaml:"args"`
}

// Override writes the compose override: each service that builds from the
// Dockerfile builds from the staged context with the stand-ins as its
// bases; each service that runs a pinned image runs its stand-in; a
// service whose image has no stand-in is left out, and leftOut says why.
func Override(composeYAML, dockerfileText []byte, context string, built []Built) (out []byte, leftOut map[string]string, err error) {
	var cf composeFile
	if err := yaml.Unmarshal(composeYAML, &cf); err != nil {
		return nil, nil, fmt.Errorf("standins: docker-compose.yml: %w", err)
	}
	df, err := parseDockerfile(dockerfileText)
	if err != nil {
		return nil, nil, err
	}
	byArg, byPin := map[string]Built{}, map[string]Built{}
	for _, b := range built {
		if b.Arg != "" {
			byArg[b.Arg] = b
		} else {
			byPin[b.Pin] = b
		}
	}
	o := overrideFile{Services: map[string]overrideService{}}
	leftOut = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(cf.Services)) {
		svc := cf.Services[name]
		if svc.Build == nil {
			b, ok := byPin[svc.Image]
			if !ok {
				leftOut[name] = "no stand-in for " + svc.Image
				o.Services[name] = overrideService{Profiles: []string{leftOutProfile}}
				continue
			}
			o.Services[name] = overrideService{Image: b.Ref}
			continue
		}
		target := ""
		if m, ok := svc.Build.(map[string]any); ok {
			target, _ = m["target"].(string)
		}
		if target == "" {
			return nil, nil, fmt.Errorf("standins: service %s builds no target; the override knows only the Dockerfile's stages", name)
		}
		args, images, err := df.needs(target)
		if err != nil {
			return nil, nil, fmt.Errorf("standins: service %s: %w", name, err)
		}
		pass := map[string]string{}
		var missing []string
		for _, a := range args {
			if b, ok := byArg[a]; ok {
				pass[a] = b.Ref
			} else {
				missing = append(missing, a+"="+df.globals[a])
			}
		}
		missing = append(missing, images...)
		if len(missing) > 0 {
			leftOut[name] = "no stand-in for " + strings.Join(missing, ", ")
			o.Services[name] = overrideService{Profiles: []string{leftOutProfile}}
			continue
		}
		o.Services[name] = overrideService{Build: &overrideBuild{Context: context, Args: pass}}
	}
	body, err := yaml.Marshal(o)
	if err != nil {
		return nil, nil, fmt.Errorf("standins: %w", err)
	}
	var head strings.Builder
	head.WriteString("# Written by `make standins` (tools/standins); it is rewritten on each run.\n" +
		"# docker-compose.yml on an engine with no registry: burnlab's images build\n" +
		"# from the staged context on the stand-in bases, the others run stand-ins.\n")
	for _, name := range slices.Sorted(maps.Keys(leftOut)) {
		fmt.Fprintf(&head, "# Left out (profile %s): %s, %s.\n", leftOutProfile, name, leftOut[name])
	}
	return append([]byte(head.String()), body...), leftOut, nil
}
