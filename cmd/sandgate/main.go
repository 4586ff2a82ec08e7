// Command sandgate is the policy-governed sandbox gateway for Nomad and its
// operator CLI: rendering hardened sandbox jobs, evaluating and inspecting
// the Rego policy bundle.
//
// main is the only place that reads flags and the environment; it turns them
// into the Config structs of the packages it wires together.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes of the CLI.
const (
	exitOK     = 0
	exitError  = 1 // something broke: bad flags, unreadable input, policy error
	exitDenied = 3 // the policy decided: deny
)

// exitCodeError carries a specific exit code out of a command.
type exitCodeError struct {
	code int
	err  error
	// silent: the command already said everything (an exec'd command's own
	// exit status is passed on, as docker exec does).
	silent bool
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// errDenied is returned by commands whose outcome is a policy deny: the
// decision is already printed, the exit code is 3.
var errDenied = &exitCodeError{code: exitDenied, err: errors.New("denied by policy")}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run with ctx as every command's context: the commands that
// serve until SIGINT or SIGTERM (serve, dev, sim) also stop when ctx is done.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		if ec != errDenied && !ec.silent {
			fmt.Fprintln(stderr, "sandgate:", err)
		}
		return ec.code
	}
	fmt.Fprintln(stderr, "sandgate:", err)
	return exitError
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sandgate",
		Short:         "Policy-governed sandbox gateway for Nomad",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(suggestFlag)
	root.AddCommand(newRenderCmd(), newPolicyCmd(), newDemoCmd(), newDevCmd(), newServeCmd(), newSimCmd(), newTokenCmd(), newKeyCmd(), newIsolationCmd(),
		newSandboxCmd(), newHostCmd(), newStoreCmd(), newVersionCmd())
	addVersionFlag(root)
	setUsageTemplate(root)
	refuseUnknownSubcommands(root)
	explainArgErrors(root)
	return root
}
