// Command standins builds, from what this machine has, the images burnlab's
// compose stack needs and an engine with no registry cannot pull, stages
// the build context, and writes the compose override that uses them
// (package standins). `make standins` runs it; `make up-offline` then
// starts the stack with the override.
//
//	standins [-root .] [-out .offline] [-busybox /bin/busybox]
//	standins -tools bin [-root .]
//
// With -tools it builds only the pinned Prometheus, promtool, Alertmanager
// and amtool into that folder, for the native lab and the rule checks
// (make tools).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"burnlab/shared/service"
	"burnlab/tools/standins"
)

func main() {
	service.Main("standins", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout) })
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("standins", flag.ContinueOnError)
	o := standins.Options{Log: stdout}
	fs.StringVar(&o.Root, "root", ".", "the repo")
	fs.StringVar(&o.Out, "out", ".offline", "where builds, the staged build context and the override go")
	fs.StringVar(&o.Busybox, "busybox", "/bin/busybox", "a statically linked busybox (Debian's busybox-static)")
	fs.StringVar(&o.Go, "go", "go", "the go command: its GOROOT goes into the Go image, and it builds Prometheus and Alertmanager")
	docker := fs.String("docker", "docker", "the docker CLI")
	tools := fs.String("tools", "", "build only Prometheus, promtool, Alertmanager and amtool at the pinned versions into this folder")
	service.Usage(fs, nil, "standins: build the stand-in images, stage the build context, write the compose override\n\nFlags:\n")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tools != "" {
		return standins.Tools(ctx, o.Root, o.Go, *tools, stdout)
	}
	o.Engine = standins.Docker{Command: *docker}
	r, err := standins.Run(ctx, o)
	if err != nil {
		return err
	}
	for _, b := range r.Images {
		fmt.Fprintf(stdout, "  %-13s %s\n  %-13s stands for %s: %s\n", b.Name, b.Ref, "", b.Pin, b.Differs)
	}
	for _, name := range slices.Sorted(maps.Keys(r.LeftOut)) {
		fmt.Fprintf(stdout, "  left out: %s (%s)\n", name, r.LeftOut[name])
	}
	fmt.Fprintf(stdout, "build context %s\noverride      %s\n", r.Context, r.Override)
	return nil
}
