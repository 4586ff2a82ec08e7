package testbin

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"
)

// serveListening is the line `sandgate serve` logs once it accepts
// connections, with its address.
var serveListening = regexp.MustCompile(`msg="sandgate gateway listening" addr=([0-9.:]+)`)

// Serve runs `sandgate serve` child processes one after another (a test
// kills and restarts it): the standard error of all of them is kept as one
// log, and each of their lines can be watched. The zero value is ready.
type Serve struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

// Start starts cmd (a `sandgate serve` the caller configured: arguments,
// environment), hands every line it writes to standard error to onLine
// (when not nil) and to the log, and returns the address it listens on
// once it says so. It fails t when the process exits first or does not
// listen within wait. Its standard output is discarded.
func (s *Serve) Start(t testing.TB, cmd *exec.Cmd, wait time.Duration, onLine func(string)) string {
	t.Helper()
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	addr := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if onLine != nil {
				onLine(line)
			}
			if m := serveListening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	// Wait closes the pipe: only once every line has been read.
	go func() { <-read; _ = cmd.Wait(); close(exited) }()
	select {
	case a := <-addr:
		return a
	case <-exited:
		t.Fatalf("sandgate serve exited at start:\n%s", s.Log())
	case <-time.After(wait):
		t.Fatalf("sandgate serve did not listen within %s:\n%s", wait, s.Log())
	}
	return ""
}

// Signal sends sig to the running process and waits until it has exited,
// killing it after grace; it does nothing when no process runs.
func (s *Serve) Signal(sig os.Signal, grace time.Duration) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Send sends sig to the running process and returns; it does nothing
// when no process runs.
func (s *Serve) Send(sig os.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Log is everything every process wrote to standard error so far.
func (s *Serve) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}
