// Package testbin builds the sandgate binary and runs it for the
// black-box tests under test/: `sandgate dev` (integration, browser) and
// `sandgate serve` child processes that a test kills and restarts (crash,
// e2e). One way to start the product as an operator would, shared by every
// test that needs it.
package testbin

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Build compiles ./cmd/sandgate into the test's temp dir and returns its path.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandgate")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sandgate") //nolint:gosec // G204: the test builds its own binary into its temp dir
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Options says how to run `sandgate dev`.
type Options struct {
	// Data is the data dir (default: a new temp dir).
	Data string
	// Args are added after `dev --listen 127.0.0.1:0 --data DIR`.
	Args []string
	// Env is the process environment; nil means this process's.
	Env []string
}

// Dev is a running `sandgate dev`, stopped (SIGINT) when the test ends.
type Dev struct {
	URL      string // http://127.0.0.1:PORT
	Operator string // the operator token it minted
	Data     string
	// Banner is everything it printed up to its address (the SIMULATED
	// banner among it).
	Banner string
}

var listening = regexp.MustCompile(`sandgate dev: (http://[0-9.:]+)`)

// StartDev runs `sandgate dev` on a free loopback port and waits until it
// prints its address; its log is shown when the test fails.
func StartDev(t testing.TB, bin string, o Options) *Dev {
	t.Helper()
	if o.Data == "" {
		o.Data = t.TempDir()
	}
	args := append([]string{"dev", "--listen", "127.0.0.1:0", "--data", o.Data}, o.Args...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // G204: the binary the test just built
	cmd.Env = o.Env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("gateway log:\n%s", stderr.String())
		}
	})
	// The reader sends the address and everything printed before it; it
	// keeps draining stdout afterwards so the gateway never blocks on it.
	type started struct{ url, banner string }
	found := make(chan started, 1)
	go func() {
		var banner strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			banner.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- started{m[1], banner.String()}:
				default:
				}
			}
		}
	}()
	d := &Dev{Data: o.Data}
	select {
	case s := <-found:
		d.URL, d.Banner = s.url, s.banner
	case <-time.After(60 * time.Second):
		t.Fatalf("the gateway did not start within 60 s")
	}
	tok, err := os.ReadFile(filepath.Join(o.Data, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	d.Operator = strings.TrimSpace(string(tok))
	return d
}
