package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway/client"
)

// maxServerWait is the longest wait_seconds the gateway accepts; a longer
// --wait is spent polling after the create answered.
const maxServerWait = 120 * time.Second

// pollInterval is how often a starting sandbox is looked at again.
const pollInterval = time.Second

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

func newSandboxCreateCmd(a *apiFlags) *cobra.Command {
	var (
		profile, network, node, image string
		idemKey                       string
		reissue                       bool
		ttl, wait                     time.Duration
		cpu, memory                   int64
		labels                        []string
	)
	cmd := &cobra.Command{
		Use:   "create [--profile P] [--network N] [--ttl DUR] [--node NODE] [--image IMG] [--cpu MHZ] [--memory MB] [--label K=V]... [--wait DUR] [--idempotency-key K [--reissue-token]]",
		Short: "Create a sandbox and print it with its session token (shown once)",
		Long: `Create a sandbox; the policy bundle's defaults fill what is not given.
The session token is printed this once: keep it, it is not shown again.

The command waits up to --wait for the sandbox to run (a progress line on
stderr), then prints it. --wait 0 prints it as soon as the gateway answers,
possibly still "starting". A sandbox still starting when --wait runs out,
or one that failed, exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lm, err := parseKV("label", labels)
			if err != nil {
				return err
			}
			if ttl != 0 && ttl < time.Second {
				return errors.New("--ttl must be at least 1s, e.g. 1h")
			}
			if wait < 0 {
				return errors.New("--wait must not be negative")
			}
			if reissue && idemKey == "" {
				return errors.New("--reissue-token needs --idempotency-key: only a repeated create reissues a token")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := checkChoices(cmd, c, map[string]string{"profiles": profile, "networks": network, "images": image}); err != nil {
				return err
			}
			ws := seconds(min(wait, maxServerWait))
			req := client.CreateRequest{Profile: nonZero(profile), Network: nonZero(network), TTLSeconds: nonZero(seconds(ttl)),
				Node: nonZero(node), CPUMHz: nonZero(cpu), MemoryMB: nonZero(memory), Image: nonZero(image),
				Labels: lm, WaitSeconds: &ws, ReissueToken: nonZero(reissue)}
			ctx, stop := interruptible(cmd)
			defer stop()
			where := node
			if where == "" {
				where = "the least loaded enrolled node"
			}
			deadline := time.Now().Add(wait)
			prog := startProgress(cmd.ErrOrStderr(), "creating sandbox on "+where)
			defer prog.finish()
			s, err := c.CreateSandbox(ctx, req, client.WithIdempotencyKey(idemKey))
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("%w (the gateway may have created the sandbox; see: sandgate sandbox list)", apiError(a, err))
			}
			if err != nil {
				return apiError(a, err)
			}
			var pollErr error
			if s.State == client.StateStarting && wait > 0 {
				prog.set(fmt.Sprintf("waiting for sandbox %s on %s to run", s.ID, s.Node))
				s, pollErr = pollStarting(ctx, c, s, deadline)
			}
			prog.finish()
			return reportCreated(cmd, a, s, wait, pollErr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&profile, "profile", "", "strict or workspace (default from the policy: strict)")
	f.StringVar(&network, "network", "", "none or egress (default none)")
	f.DurationVar(&ttl, "ttl", 0, "time to live, e.g. 30m (default from the policy: 1h)")
	f.StringVar(&node, "node", "", "the node to run on (default: the gateway picks)")
	f.StringVar(&image, "image", "", "container image from the policy's allowlist")
	f.StringVar(&idemKey, "idempotency-key", "", "makes the create safe to retry: the same key and flags answer the sandbox it created (24 h)")
	f.BoolVar(&reissue, "reissue-token", false, "with --idempotency-key: a repeat hands a fresh session token and revokes the old one")
	f.Int64Var(&cpu, "cpu", 0, "CPU in MHz")
	f.Int64Var(&memory, "memory", 0, "memory in MB")
	f.StringArrayVar(&labels, "label", nil, "a label KEY=VALUE (repeatable)")
	f.DurationVar(&wait, "wait", time.Minute, "how long to wait for the sandbox to run")
	return cmd
}

// pollStarting looks at a starting sandbox every second until it runs,
// fails or the deadline passes. The session token of the create answer is
// kept: GET never shows it.
func pollStarting(ctx context.Context, c *client.Client, s client.Sandbox, deadline time.Time) (client.Sandbox, error) {
	tok := s.Token
	// withToken puts the create answer's token back on every way out: a
	// GET answer has none, and a sandbox that may still run needs it.
	withToken := func(s client.Sandbox, err error) (client.Sandbox, error) {
		if s.State != client.StateFailed && s.State != client.StateEnded {
			s.Token = tok
		}
		return s, err
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for s.State == client.StateStarting {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return withToken(s, nil) // still starting: the caller says so
			}
			return withToken(s, ctx.Err())
		case <-t.C:
		}
		next, err := c.GetSandbox(ctx, s.ID)
		if errors.Is(err, context.DeadlineExceeded) {
			return withToken(s, nil)
		}
		if err != nil {
			return withToken(s, err)
		}
		s = next
	}
	return withToken(s, nil)
}

// reportCreated prints the sandbox and its token once, then says why the
// command fails when the sandbox does not run.
func reportCreated(cmd *cobra.Command, a *apiFlags, s client.Sandbox, wait time.Duration, pollErr error) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := printSandbox(out, a, s); err != nil {
		return err
	}
	if s.Token != "" && !a.json() {
		fmt.Fprintln(errOut, "note: the session token is shown only this once; keep it now")
	}
	switch {
	case pollErr != nil:
		return fmt.Errorf("sandbox %s is %s; watching it stopped: %w", s.ID, s.State, apiError(a, pollErr))
	case s.State == client.StateFailed:
		return fmt.Errorf("sandbox %s failed: %s", s.ID, orDash(s.LastError))
	case s.State == client.StateStarting && wait > 0:
		return fmt.Errorf("sandbox %s is still starting after %s (the gateway keeps watching it; see: sandgate sandbox get %s)", s.ID, wait, s.ID)
	}
	return nil
}

// checkChoices refuses a --profile, --network or --image the gateway's
// bundle does not offer (GET /v1/capabilities), listing the ones it does,
// before anything is created. A gateway that does not say (or cannot be
// asked) is left to decide: the policy refuses what it does not allow.
func checkChoices(cmd *cobra.Command, c *client.Client, given map[string]string) error {
	asked := false
	for _, v := range given {
		asked = asked || v != ""
	}
	if !asked {
		return nil
	}
	ctx, stop := interruptible(cmd)
	defer stop()
	caps, err := c.Capabilities(ctx)
	if err != nil || caps.Choices == nil {
		return nil //nolint:nilerr // the create itself reports an unreachable gateway
	}
	for _, kind := range []string{"profiles", "networks", "images"} {
		v := given[kind]
		valid, ok := caps.Choices[kind]
		if v == "" || !ok || slices.Contains(valid, v) {
			continue
		}
		flag := "--" + strings.TrimSuffix(kind, "s")
		return fmt.Errorf("%s %q is not one of %s (the gateway's policy bundle %s)", flag, v, strings.Join(valid, ", "), caps.BundleRevision)
	}
	return nil
}
