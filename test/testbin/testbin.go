// Package testbin builds the sandgate binary and runs it for the
// black-box tests under test/: `sandgate dev` (integration, browser) and
// `sandgate serve` child processes that a test kills and restarts (crash,
// e2e). One way to start the product as an operator would, shared by every
// test that needs it.
package testbin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
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
	// Wait bounds how long it may take to print its address (default 60 s).
	Wait time.Duration
}

// Dev is a running `sandgate dev`, stopped (SIGINT) when the test ends.
type Dev struct {
	URL      string // http://127.0.0.1:PORT
	Operator string // the operator token it minted
	Data     string
	// Banner is everything it printed up to its address (the SIMULATED
	// banner among it).
	Banner string

	stop  func() error
	found chan string // everything printed up to the address, once
	sent  bool        // found was sent
	mu    sync.Mutex
	out   strings.Builder // everything it printed to standard output
}

// devOutput is the process's standard output: kept whole, and watched
// for the address line. exec's Wait returns only once all of it arrived.
type devOutput Dev

func (w *devOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(p)
	if w.sent {
		return len(p), nil
	}
	all := w.out.String()
	lines := all[:strings.LastIndexByte(all, '\n')+1] // complete lines only
	if loc := listening.FindStringIndex(lines); loc != nil {
		end := loc[1] + strings.IndexByte(lines[loc[1]:], '\n') + 1
		w.found <- lines[:end] // buffered: sent once
		w.sent = true
	}
	return len(p), nil
}

// Stop ends it with SIGINT, as an operator's Ctrl-C would, and waits until
// it has exited (SIGKILL after 60 s); it returns how it exited. The test's
// cleanup calls it too; a second call returns the first's result.
func (d *Dev) Stop() error { return d.stop() }

// Output is everything it printed to standard output so far.
func (d *Dev) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
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
	cmd.WaitDelay = 60 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	d := &Dev{Data: o.Data, found: make(chan string, 1)}
	cmd.Stdout = (*devOutput)(d)
	d.stop = sync.OnceValue(func() error {
		cancel()
		err := cmd.Wait()
		if cmd.ProcessState != nil && cmd.ProcessState.Success() {
			return nil // exec reports the cancel that asked for the exit
		}
		return err
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Stop()
		if t.Failed() {
			t.Logf("gateway log:\n%s\ngateway output:\n%s", stderr.String(), d.Output())
		}
	})
	wait := o.Wait
	if wait == 0 {
		wait = 60 * time.Second
	}
	select {
	case banner := <-d.found:
		d.URL, d.Banner = listening.FindStringSubmatch(banner)[1], banner
	case <-time.After(wait):
		t.Fatalf("the gateway did not start within %s", wait)
	}
	tok, err := os.ReadFile(filepath.Join(o.Data, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	d.Operator = strings.TrimSpace(string(tok))
	return d
}
