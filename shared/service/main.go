package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a command's run function with a context that ends on SIGINT or
// SIGTERM, and exits 1 with the error on stderr (0 for -help).
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Parse parses args into fs, refuses stray arguments, and then fills the
// flags not given from the environment (envs: flag name → variable).
func Parse(fs *flag.FlagSet, args []string, envs map[string]string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return Env(fs, envs)
}
