package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"burnlab/shared/scenario"
	"burnlab/shared/variant"
)

// Stack is where `make scenario` finds a running stack: the contract's
// ports on 127.0.0.1, which the native lab listens on and compose
// publishes alike. Which of the two runs is told by the lab's switch
// control: it answers only when the lab does.
type Stack struct {
	Upstream, GatewayAdmin, Control string // host:port
	// Compose is the compose command (make's $(COMPOSE)); a build switch
	// runs `<Compose> up --build --detach --no-deps gateway` with
	// GATEWAY_TAG set, as make fixed does.
	Compose []string
	Out     io.Writer
	// Share, when set, runs a one-step fault at this share of streams
	// instead of the table's (make scenario SHARE=0.03): a faster burn.
	Share float64
}

// DefaultStack is the contract's stack.
func DefaultStack() Stack {
	a := DefaultAddrs()
	return Stack{Upstream: a.Upstream, GatewayAdmin: a.GatewayAdmin, Control: DefaultControl,
		Compose: []string{"docker", "compose"}, Out: os.Stdout}
}

// DefaultControl is where a running `lab up` takes switches.
const DefaultControl = "127.0.0.1:6099"

// ApplyScenario puts a scenario of shared/scenario's table in place on a
// running stack: the gateway build it needs (switching only if another
// runs), then the upstream's fault; and says what should fire. none
// clears the fault and leaves the build alone.
func ApplyScenario(ctx context.Context, name string, s Stack) error {
	sc, err := scenario.Lookup(name)
	if err != nil {
		return err
	}
	if s.Share != 0 {
		if sc, err = sc.WithShare(s.Share); err != nil {
			return err
		}
	}
	// Nothing is rebuilt for a fault that could not be set: a stack
	// started before the control existed has none.
	if _, err := scenario.Get(ctx, "http://"+s.Upstream); err != nil {
		return fmt.Errorf("%w (a stack started before make scenario existed needs a restart)", err)
	}
	build, err := gatewayBuild(ctx, s.GatewayAdmin)
	if err != nil {
		return err
	}
	if build != sc.Build && sc.Name != scenario.None {
		fmt.Fprintf(s.Out, "the gateway runs the %s build; %s needs %s: switching\n", build, sc.Name, sc.Build)
		if err := switchBuild(ctx, sc.Build, s); err != nil {
			return err
		}
	}
	set := func() error { return scenario.Set(ctx, "http://"+s.Upstream, sc.Name) }
	why := sc.Why
	if s.Share != 0 {
		set = func() error { return scenario.SetShare(ctx, "http://"+s.Upstream, sc.Name, s.Share) }
		var burns []string
		for _, slo := range scenario.SLOs {
			if b, ok := sc.Burn[slo]; ok {
				burns = append(burns, fmt.Sprintf("%s %gx", slo, b))
			}
		}
		why = strings.Join(burns, ", ") + ", the table's burn scaled to the share"
	}
	if err := set(); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "scenario %s (gateway: %s build)\n  injected:      %s\n  expected burn: %s\n  must fire:     %s\n  make profile:  %s\n",
		sc.Name, sc.Build, sc.What, why, sc.Expected(), sc.Profile)
	return nil
}

var variantLabel = regexp.MustCompile(`^gateway_build_info\{[^}]*variant="([a-z]+)"`)

// gatewayBuild reads the running gateway's variant from its
// gateway_build_info.
func gatewayBuild(ctx context.Context, admin string) (variant.Variant, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("no gateway at %s (start the stack: make lab, or docker compose up): %w", admin, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the gateway's metrics at %s: %s", admin, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := variantLabel.FindStringSubmatch(sc.Text()); m != nil {
			v, err := variant.Parse(m[1])
			if err != nil {
				return "", fmt.Errorf("the gateway's metrics at %s: %w", admin, err)
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("the gateway's metrics at %s: %w", admin, err)
	}
	return "", fmt.Errorf("the gateway's metrics at %s have no gateway_build_info", admin)
}

// switchBuild switches the lab's gateway through its control, or, when no
// lab answers there, compose's.
func switchBuild(ctx context.Context, v variant.Variant, s Stack) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Control+"/switch?variant="+string(v), nil)
	if err != nil {
		return err
	}
	// A switch drains the gateway's streams first: up to its 60 s drain.
	resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
	// Compose only when no lab listens: a lab that answered late or
	// badly must not get a compose stack started beside it.
	if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("the lab's switch at %s: %w", s.Control, err)
	}
	if err == nil {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the lab's switch: %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		fmt.Fprintf(s.Out, "lab: %s", b)
		return nil
	}
	if len(s.Compose) == 0 {
		return fmt.Errorf("no lab at %s and no compose command: %w", s.Control, err)
	}
	args := append(slices.Clone(s.Compose[1:]), "up", "--build", "--detach", "--no-deps", "gateway")
	fmt.Fprintf(s.Out, "no lab at %s: GATEWAY_TAG=%s %s %s\n", s.Control, v, s.Compose[0], strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, s.Compose[0], args...) //nolint:gosec // G204: make's $(COMPOSE), the user's own command
	cmd.Env = append(os.Environ(), "GATEWAY_TAG="+string(v))
	cmd.Stdout, cmd.Stderr = s.Out, s.Out
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("compose could not switch the gateway to %s (is the stack up? docker compose up): %w", v, err)
		}
		return fmt.Errorf("running %s: %w", s.Compose[0], err)
	}
	return nil
}
