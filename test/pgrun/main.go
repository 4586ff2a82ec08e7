// Command pgrun runs a command beside a PostgreSQL server of its own:
//
//	go run ./test/pgrun -- go test ./...
//
// It starts Debian's PostgreSQL as its own user on a free loopback port
// (internal/pgtest.Start), exports SANDGATE_TEST_PG_DSN for the command,
// runs it, then stops the server and removes its files, and exits with the
// command's status. Each test package takes databases of its own from that
// server (pgtest.Database).
//
// When SANDGATE_TEST_PG_DSN is already set, pgrun only runs the command. When
// no server binaries are installed, it says so and runs the command
// without the variable (the PostgreSQL tests then skip), unless
// SANDGATE_PG=require, which makes that a failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"sandgate/internal/pgtest"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: pgrun -- COMMAND [ARG...]")
		return 2
	}
	if os.Getenv(pgtest.EnvDSN) != "" {
		return command(args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	srv, err := pgtest.Start(ctx, "")
	cancel()
	if err != nil {
		if os.Getenv(pgtest.EnvRequire) == "require" {
			fmt.Fprintf(os.Stderr, "pgrun: %v\npgrun: %s=require: the PostgreSQL tests must run\n", err, pgtest.EnvRequire)
			return 1
		}
		fmt.Fprintf(os.Stderr, "pgrun: no PostgreSQL for the tests, which will skip: %v\n", err)
		return command(args)
	}
	fmt.Fprintf(os.Stderr, "pgrun: PostgreSQL for the tests at %s\n", srv.DSN(""))
	_ = os.Setenv(pgtest.EnvDSN, srv.DSN(""))
	code := command(args)
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgrun: stopping PostgreSQL: %v\n", err)
	}
	return code
}

// command runs args with this process's environment and standard streams,
// passing SIGINT and SIGTERM on, and returns its exit status.
func command(args []string) int {
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the caller's own command line
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pgrun: %v\n", err)
		return 127
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "pgrun: %v\n", err)
		return 1
	}
}
