package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"sandgate/gateway/client"
)

// maxStdin stays below the gateway's 1 MiB body limit.
const maxStdin = 1<<20 - 64<<10

// splitExec reads "ID ARGV..." or "ID -- ARGV...".
func splitExec(cmd *cobra.Command, args []string) (string, []string, error) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 && dash != 1 {
		return "", nil, errors.New("give one sandbox ID before --, then the command (exec ID -- ARGV)")
	}
	if len(args) < 2 {
		return "", nil, errors.New("give a sandbox ID and a command (exec ID -- ARGV)")
	}
	return args[0], args[1:], nil
}

// readStdin reads --stdin-file (- is the CLI's own stdin) into req:
// UTF-8 text as stdin, other bytes as stdin_base64.
func readStdin(cmd *cobra.Command, name string, req *client.ExecRequest) error {
	if name == "" {
		return nil
	}
	r := cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("--stdin-file: %w", err)
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	// base64 grows the bytes by a third: the bound is on what is sent.
	b, err := io.ReadAll(io.LimitReader(r, maxStdin+1))
	if err != nil {
		return fmt.Errorf("--stdin-file: %w", err)
	}
	if len(b) > maxStdin || (!utf8.Valid(b) && base64.StdEncoding.EncodedLen(len(b)) > maxStdin) {
		return fmt.Errorf("--stdin-file: more than the API's 1 MiB body limit holds (%d bytes of text, or %d of other bytes)", maxStdin, base64.StdEncoding.DecodedLen(maxStdin))
	}
	s := string(b)
	if !utf8.Valid(b) {
		s = base64.StdEncoding.EncodeToString(b)
		req.StdinBase64 = &s
		return nil
	}
	req.Stdin = &s
	return nil
}

func newSandboxExecCmd(a *apiFlags) *cobra.Command {
	var (
		timeout            time.Duration
		workdir, stdinFile string
		env                []string
		stream             bool
	)
	cmd := &cobra.Command{
		Use:   "exec ID [--timeout DUR] [--workdir DIR] [--env K=V]... [--stdin-file F|-] [--stream] -- ARGV...",
		Short: "Run a command in a sandbox; its output and exit status become the CLI's",
		Long: `Run an argument vector in the sandbox (no shell, unless ARGV names one).
The command's stdout and stderr are written to this CLI's stdout and
stderr, and the CLI exits with the command's exit status, like docker exec.

A command still running at --timeout is stopped: its process group gets
SIGTERM, then SIGKILL 5s later if any of it is left. The CLI then exits
with the status the command ended with: 143 (128+SIGTERM) for a command
the TERM ended, 137 (128+SIGKILL) for one that had to be killed, the same
on busybox and GNU images; a command that catches TERM exits with its own
status. stderr says "the command timed out", and with -o json the result
has "timed_out": true beside that "exit_code" (the gateway decides
timed_out by its own clock, never from the status). When no exit status
arrived at all (the gateway gave up on the stream after the timeout and a
grace period), the CLI says so and exits 1.

Output beyond 64 KiB per stream is cut, and stderr says so. With -o json
the exec result object is printed and the CLI exits 0.
With --stream the output is written as it arrives (Server-Sent Events), and
a stream that ends without an exit status (the sandbox went away, Nomad
failed) says why and exits 1; with -o json each event is one JSON line.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, argv, err := splitExec(cmd, args)
			if err != nil {
				return err
			}
			envs, err := parseKV("env", env)
			if err != nil {
				return err
			}
			req := client.ExecRequest{Argv: argv, TimeoutSeconds: nonZero(seconds(timeout)), Workdir: nonZero(workdir), Env: envs}
			if err := readStdin(cmd, stdinFile, &req); err != nil {
				return err
			}
			if timeout < 0 {
				return errors.New("--timeout must not be negative")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			if stream {
				return streamExec(cmd, a, c.ExecStream(ctx, id, req))
			}
			res, err := c.Exec(ctx, id, req)
			if err != nil {
				return apiError(a, err)
			}
			if a.json() {
				return printJSON(cmd.OutOrStdout(), res)
			}
			return mirrorExec(cmd, res)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&timeout, "timeout", 0, "stop the command after this long (default 60s, at most 120s)")
	f.StringVar(&workdir, "workdir", "", "working directory inside the sandbox: absolute, normalised, at or under one of the policy's exec.workdir_roots (/workspace, /tmp by default)")
	f.StringArrayVar(&env, "env", nil, "an environment variable K=V (repeatable)")
	f.StringVar(&stdinFile, "stdin-file", "", "send this file (- for this CLI's stdin) to the command's stdin")
	f.BoolVar(&stream, "stream", false, "write the output as it arrives (Server-Sent Events)")
	return cmd
}

// streamExec writes a streaming exec's output as it arrives and carries
// its exit status out; with -o json every event is one JSON line.
func streamExec(cmd *cobra.Command, a *apiFlags, events iter.Seq2[client.ExecEvent, error]) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for ev, err := range events {
		if err != nil {
			return apiError(a, err)
		}
		if a.json() {
			fmt.Fprintf(out, "{\"id\":%d,\"event\":%q,\"data\":%s}\n", ev.ID, ev.Event, ev.Data)
		}
		switch {
		case ev.Event == client.EventStdout && !a.json():
			if _, err := out.Write(ev.Output); err != nil {
				return err
			}
		case ev.Event == client.EventStderr && !a.json():
			if _, err := errOut.Write(ev.Output); err != nil {
				return err
			}
		case ev.Exit != nil:
			x := ev.Exit
			if !a.json() {
				if x.StdoutTruncated {
					fmt.Fprintf(errOut, "sandgate: stdout truncated: %d bytes produced\n", x.StdoutBytes)
				}
				if x.StderrTruncated {
					fmt.Fprintf(errOut, "sandgate: stderr truncated: %d bytes produced\n", x.StderrBytes)
				}
				if x.TimedOut {
					fmt.Fprintf(errOut, "sandgate: the command timed out after %s\n", time.Duration(x.DurationMS)*time.Millisecond)
				}
			}
			if x.ExitCode != 0 && !a.json() {
				return &exitCodeError{code: x.ExitCode, err: fmt.Errorf("the command exited with status %d", x.ExitCode), silent: true}
			}
			return nil
		case ev.Error != nil:
			return fmt.Errorf("the stream ended without an exit status: %s: %s", ev.Error.Code, ev.Error.Detail)
		}
	}
	return nil
}

// mirrorExec writes the command's output where the command would have,
// says what was cut, and carries its exit status out.
func mirrorExec(cmd *cobra.Command, res client.ExecResult) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if _, err := io.WriteString(out, res.Stdout); err != nil {
		return err
	}
	if _, err := io.WriteString(errOut, res.Stderr); err != nil {
		return err
	}
	if res.StdoutTruncated {
		fmt.Fprintf(errOut, "sandgate: stdout truncated: %d of %d bytes shown\n", len(res.Stdout), res.StdoutBytes)
	}
	if res.StderrTruncated {
		fmt.Fprintf(errOut, "sandgate: stderr truncated: %d of %d bytes shown\n", len(res.Stderr), res.StderrBytes)
	}
	if res.TimedOut {
		fmt.Fprintf(errOut, "sandgate: the command timed out after %s\n", time.Duration(res.DurationMS)*time.Millisecond)
	}
	switch {
	case res.ExitCode == nil:
		return errors.New("the command's exit status is unknown: the gateway gave up on its stream after the timeout")
	case *res.ExitCode != 0:
		return &exitCodeError{code: *res.ExitCode, err: fmt.Errorf("the command exited with status %d", *res.ExitCode), silent: true}
	}
	return nil
}

func newSandboxLogsCmd(a *apiFlags) *cobra.Command {
	var (
		stream string
		tail   int64
	)
	cmd := &cobra.Command{
		Use:   "logs ID [--stream stdout|stderr] [--tail BYTES]",
		Short: "Print the end of a sandbox task's stdout or stderr, as it is",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if stream != "" && stream != "stdout" && stream != "stderr" {
				return fmt.Errorf("--stream must be stdout or stderr, not %q", stream)
			}
			if tail < 0 {
				return errors.New("--tail must not be negative")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			b, err := c.Logs(cmd.Context(), args[0], client.LogsOptions{Stream: stream, TailBytes: tail})
			if err != nil {
				return apiError(a, err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&stream, "stream", "", "stdout or stderr (default stdout)")
	cmd.Flags().Int64Var(&tail, "tail", 0, "the last N bytes (default and maximum 64 KiB)")
	return cmd
}
