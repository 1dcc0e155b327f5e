// Package compose reads burnlab's docker-compose.yml and Dockerfile as
// Docker would — with compose-go, the loader of the docker compose CLI, and
// buildkit's Dockerfile front end, the one `docker build --check` runs — so
// that they can be checked on a machine with no Docker engine. Its tests hold
// the compose stack to the native lab (package lab), which the end-to-end
// test runs.
//
// It is the check that guards docker-compose.yml and the Dockerfile (make
// check-compose): a change to either goes with its test here. It is a
// module of its own, out of go.work, so that compose-go and buildkit cannot
// move the services' dependency versions. docs/tests.md maps each package
// of stack/ to the artefact it guards.
package compose

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/subrequests/lint"
	digest "github.com/opencontainers/go-digest"
)

// Load reads root/docker-compose.yml with root/.env, as `docker compose`
// run in root does; env entries (KEY=value) override .env as the shell's
// variables do. Nothing else from the process environment is read, so the
// result does not depend on who runs it.
func Load(ctx context.Context, root string, env ...string) (*types.Project, error) {
	return LoadWith(ctx, root, nil, env...)
}

// LoadWith reads root/docker-compose.yml with override files over it, as
// `docker compose -f docker-compose.yml -f <override>…` run in root does
// (make up-offline passes the stand-ins' override so).
func LoadWith(ctx context.Context, root string, overrides []string, env ...string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions(append([]string{filepath.Join(root, "docker-compose.yml")}, overrides...),
		cli.WithWorkingDirectory(root),
		cli.WithEnvFiles(filepath.Join(root, ".env")),
		cli.WithDotEnv,
		cli.WithEnv(env),
	)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	return p, nil
}

// Lint runs buildkit's Dockerfile checks (`docker build --check`) on the
// Dockerfile at path. Base images are not fetched: the checks that need
// their configuration see an empty one for this machine's platform.
func Lint(ctx context.Context, path string) ([]lint.Warning, error) {
	dt, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	res, err := dockerfile2llb.DockerfileLint(ctx, dt, dockerfile2llb.ConvertOpt{
		MetaResolver: offline{},
		SourceMap:    &llb.SourceMap{Filename: filepath.Base(path), Data: dt, Definition: &llb.Definition{}},
	})
	if err != nil {
		return nil, fmt.Errorf("compose: linting %s: %w", path, err)
	}
	return res.Warnings, nil
}

// offline answers buildkit's base image lookups without a registry: burnlab
// builds and tests talk to 127.0.0.1 only.
type offline struct{}

func (offline) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	return ref, "", []byte(`{"os":"linux","architecture":"` + runtime.GOARCH + `","config":{}}`), nil
}
