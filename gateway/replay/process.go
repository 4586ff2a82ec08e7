package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"sandgate/gateway/audit"
)

// Command is how to start a replay worker: the sandgate binary itself
// (os.Executable()) with WorkerArgs, or a test binary that serves workers.
type Command struct {
	Path string
	Args []string
	// Env is the worker's whole environment; nil means none.
	Env []string
}

// Limits bound one replay worker. Every field must be positive.
type Limits struct {
	// Memory is the worker's RLIMIT_DATA in bytes: its heap (every
	// private writable mapping) cannot grow past it. RLIMIT_AS would
	// bound reservations rather than use: a Go process reserves more
	// than 1 GiB of address space at start.
	Memory int64
	// CPU is the worker's RLIMIT_CPU, rounded up to whole seconds: the
	// kernel kills it with SIGKILL once it has used that much CPU time.
	CPU time.Duration
	// Wall is how long the worker may run before the gateway kills it.
	Wall time.Duration
}

// The limits a LimitError names.
const (
	LimitMemory = "memory"
	LimitCPU    = "cpu_time"
	LimitWall   = "wall_clock"
)

// LimitError is a worker that ran past one of its Limits and was ended.
type LimitError struct {
	// Limit is LimitMemory, LimitCPU or LimitWall.
	Limit string
	// Bound is the limit's value as configured, e.g. "1073741824 bytes".
	Bound string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("replay: the candidate ran past its %s limit (%s) and was ended", e.Limit, e.Bound)
}

// CandidateError is a candidate bundle that does not load.
type CandidateError struct{ Reason string }

func (e *CandidateError) Error() string { return "replay: the candidate does not load: " + e.Reason }

// ErrWorker means the worker failed for another reason than its limits
// (it was killed by someone else, crashed, or broke the exchange): no
// report, nothing changed.
var ErrWorker = errors.New("replay: the replay worker failed")

// ErrUnsupported means this platform cannot bound a worker: replay is
// refused rather than run unbounded.
var ErrUnsupported = errors.New("replay: bounding a replay worker needs Linux resource limits")

// maxWorkerOutput bounds what is kept of a worker's stdout (its one
// result line) and stderr (the first lines say why it died).
const (
	maxWorkerOutput = 16 << 20
	maxWorkerStderr = 8 << 10
)

// Run replays the decisions that feed hands it under the candidate bundle
// in a worker process started from cmd and bounded by lim, and returns its
// report. The caller's process never loads the candidate. Errors: a
// *CandidateError for a bundle that does not load, a *LimitError for a
// worker ended by a limit, ctx's error when ctx ended first, ErrWorker
// (wrapped, with what the worker said) otherwise, ErrUnsupported where
// limits cannot be set. feed's own error is returned as it is, unless the
// worker's end explains it.
func Run(ctx context.Context, cmd Command, lim Limits, bundle []byte, opts Options, feed func(each func(audit.Entry) error) error) (Report, error) {
	if cmd.Path == "" {
		return Report{}, fmt.Errorf("%w: no worker command is configured", ErrWorker)
	}
	if lim.Memory <= 0 || lim.CPU <= 0 || lim.Wall <= 0 {
		return Report{}, fmt.Errorf("replay: limits %+v: every limit must be positive", lim)
	}
	if !limitsSupported {
		return Report{}, ErrUnsupported
	}
	wctx, cancel := context.WithTimeoutCause(ctx, lim.Wall, errWall)
	defer cancel()
	c := exec.CommandContext(wctx, cmd.Path, cmd.Args...) //nolint:gosec // G204: the gateway's own binary, from its configuration
	c.Env = cmd.Env
	if c.Env == nil {
		c.Env = []string{}
	}
	c.WaitDelay = time.Second
	stdout := &capped{max: maxWorkerOutput}
	stderr := &capped{max: maxWorkerStderr}
	c.Stdout, c.Stderr = stdout, stderr
	stdin, err := c.StdinPipe()
	if err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrWorker, err)
	}
	if err := c.Start(); err != nil {
		return Report{}, fmt.Errorf("%w: start %s: %w", ErrWorker, cmd.Path, err)
	}
	// The worker reads nothing but its request before it loads the
	// candidate: its limits are in force before the candidate is.
	if err := setLimits(c.Process.Pid, lim); err != nil {
		_ = c.Process.Kill()
		_ = c.Wait()
		return Report{}, fmt.Errorf("%w: limit the worker: %w", ErrWorker, err)
	}
	feedErr := feedWorker(stdin, bundle, opts, feed)
	_ = stdin.Close()
	waitErr := c.Wait()

	switch {
	case errors.Is(context.Cause(wctx), errWall) && ctx.Err() == nil:
		return Report{}, &LimitError{Limit: LimitWall, Bound: lim.Wall.String()}
	case ctx.Err() != nil:
		return Report{}, ctx.Err()
	}
	if waitErr != nil {
		return Report{}, explainExit(c, waitErr, lim, stderr.String())
	}
	var res workerResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.buf.Bytes()), &res); err != nil {
		if feedErr != nil && !errors.Is(feedErr, errFeedStopped) {
			return Report{}, feedErr
		}
		return Report{}, fmt.Errorf("%w: its result is not JSON: %w", ErrWorker, err)
	}
	switch {
	case res.Candidate != "":
		return Report{}, &CandidateError{Reason: res.Candidate}
	case res.Report == nil:
		return Report{}, fmt.Errorf("%w: it answered no report", ErrWorker)
	}
	// A worker that stopped at the limit stopped reading: feeding it
	// more failed, which is expected.
	if feedErr != nil && !errors.Is(feedErr, errFeedStopped) {
		return Report{}, feedErr
	}
	return *res.Report, nil
}

// errWall is the cause of the wall-clock deadline.
var errWall = errors.New("replay: wall-clock limit")

// errFeedStopped wraps a write to a worker that no longer reads.
var errFeedStopped = errors.New("replay: the worker stopped reading")

// feedWorker writes the request and every entry feed hands it.
func feedWorker(stdin interface{ Write([]byte) (int, error) }, bundle []byte, opts Options, feed func(func(audit.Entry) error) error) error {
	w := bufio.NewWriterSize(stdin, 64<<10)
	enc := json.NewEncoder(w)
	if err := enc.Encode(workerRequest{Bundle: bundle, Options: opts}); err != nil {
		return fmt.Errorf("%w: %w", errFeedStopped, err)
	}
	err := feed(func(e audit.Entry) error {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("%w: %w", errFeedStopped, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errFeedStopped, err)
	}
	return nil
}

// explainExit names why a worker ended without a result: a limit when
// one explains it, ErrWorker with what it said otherwise.
func explainExit(c *exec.Cmd, waitErr error, lim Limits, stderr string) error {
	// A Go worker whose mappings reach RLIMIT_DATA dies with "fatal
	// error: runtime: out of memory" or "cannot allocate memory", or
	// aborts when no thread stack can be mapped (cgo's pthread_create);
	// under the race detector its shadow memory fails first. These are the
	// runtime's words: a process boundary has no error values to compare.
	lower := strings.ToLower(stderr)
	for _, said := range []string{"out of memory", "cannot allocate memory", "failed to allocate", "pthread_create failed"} {
		if strings.Contains(lower, said) {
			return &LimitError{Limit: LimitMemory, Bound: fmt.Sprintf("%d bytes", lim.Memory)}
		}
	}
	if st := c.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig := ws.Signal()
			used := st.UserTime() + st.SystemTime()
			// The kernel ends a process at its RLIMIT_CPU with SIGKILL
			// (SIGXCPU first when the soft limit is below the hard one).
			if (sig == syscall.SIGKILL || sig == syscall.SIGXCPU) && used >= cpuSeconds(lim.CPU)-time.Second/2 {
				return &LimitError{Limit: LimitCPU, Bound: cpuSeconds(lim.CPU).String()}
			}
			return fmt.Errorf("%w: it was killed by signal %s after %s of CPU time, by no limit of the gateway's", ErrWorker, sig, used.Round(time.Millisecond))
		}
	}
	return fmt.Errorf("%w: %w: %s", ErrWorker, waitErr, firstLine(stderr))
}

// cpuSeconds is d rounded up to whole seconds, as RLIMIT_CPU counts.
func cpuSeconds(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	if s == "" {
		return "(it said nothing)"
	}
	return s
}

// capped keeps the first max bytes written to it and discards the rest.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }
