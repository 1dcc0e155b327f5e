// Package service holds what every burnlab process does the same way:
// flags with environment fallbacks, one JSON log line per event, and HTTP
// servers with timeouts that drain on SIGTERM.
package service

import (
	"flag"
	"fmt"
	"os"
)

// Env sets each flag of fs that was not given on the command line from its
// environment variable in envs (flag name → variable). Call it after
// fs.Parse: the command line wins.
func Env(fs *flag.FlagSet, envs map[string]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, env := range envs {
		if fs.Lookup(name) == nil {
			return fmt.Errorf("service: no flag -%s for %s", name, env)
		}
		v, ok := os.LookupEnv(env)
		if !ok || set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	return nil
}

// Usage appends the environment variables to a flag set's help.
func Usage(fs *flag.FlagSet, envs map[string]string, intro string) {
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), intro)
		fs.VisitAll(func(f *flag.Flag) {
			env := ""
			if e, ok := envs[f.Name]; ok {
				env = " [$" + e + "]"
			}
			fmt.Fprintf(fs.Output(), "  -%s%s\n    \t%s (default %q)\n", f.Name, env, f.Usage, f.DefValue)
		})
	}
}
