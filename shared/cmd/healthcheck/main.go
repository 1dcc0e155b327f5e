// Command healthcheck exits 0 when a URL answers 200 OK, else 1 with the
// reason. burnlab's images are distroless (no shell, no curl), so compose's
// healthchecks run it: healthcheck http://127.0.0.1:6060/readyz.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"burnlab/shared/service"
)

func main() {
	service.Main("healthcheck", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: healthcheck [-timeout 3s] URL\n\nExits 0 when URL answers 200 OK.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one URL")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return service.Probe(ctx, fs.Arg(0))
}
