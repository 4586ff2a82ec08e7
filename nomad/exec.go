package nomad

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// Exec wire settings.
const (
	// execStdinChunk is the largest stdin slice sent in one frame.
	execStdinChunk = 16 << 10
	// execHeartbeat is how often an empty frame keeps the stream alive, as
	// nomad/api does.
	execHeartbeat = 10 * time.Second
	// execReadLimit bounds one incoming frame.
	execReadLimit = 4 << 20
	// execCloseGrace bounds the closing handshake after the exit code.
	execCloseGrace = time.Second
)

// Exec runs argv in task of allocation allocID without a TTY, feeds it stdin
// (then closes stdin: Nomad sends no exit code before that), copies its
// output to stdout and stderr (nil discards) and returns its exit code.
//
// It speaks Nomad's exec WebSocket protocol (the frames of api.Allocations
// Exec) through the configured address: the api implementation would lose
// the close codes below and ignores ctx during the handshake.
//
// A command that ran returns its exit code and a nil error, whatever the
// code. Otherwise the exit code is -1 and the error is:
//   - ctx's error (wrapped) when ctx ended: the command may still be running
//     in the task, as Nomad does not stop it when the stream closes;
//   - ErrNodeUnreachable when Nomad cannot reach the allocation's node
//     (close 1008 "No path to node": its client agent is down);
//   - ErrNotFound for an unknown allocation (close 1008; Nomad also uses 1008
//     for other non-500 failures such as a denied ACL) or an HTTP 404;
//   - an *Error with Status 1011 and Nomad's reason when the command could not
//     start (e.g. `executable file not found in $PATH`, `task not found`);
//   - ErrExecDropped when the stream ended without an exit code (closed,
//     reset, or broken by an agent crash);
//   - ErrUnavailable when Nomad could not be reached or the handshake failed.
//
// The handshake is bounded by Config.Timeout; the stream by ctx only, and
// the output is not capped here: pass writers that bound it. stdout and
// stderr are written from the calling goroutine only, never after Exec
// returns.
func (c *Client) Exec(ctx context.Context, allocID, task string, argv []string, stdin []byte, stdout, stderr io.Writer) (exitCode int, err error) {
	return c.ExecReader(ctx, allocID, task, argv, bytes.NewReader(stdin), stdout, stderr)
}

// ExecReader is Exec with stdin read from r as the command consumes it, so
// a large upload is never held in memory (a file PUT streams its body this
// way). r is read from a goroutine of its own until EOF, then stdin is
// closed. A read error other than EOF, or ctx ending while r is still
// being read, closes the command's stdin and then breaks the stream: the
// command sees its stdin end early, so it must check what it received (the
// fileops put compares the byte count), and ExecReader returns
// ErrExecDropped, or ctx's error when ctx ended. Nomad itself does not end
// a command's stdin when the stream breaks (checked on a v1.6.5 agent with
// the docker driver, test/e2e): without that close a command reading its
// stdin would wait, holding what it had written, until the task stops.
//
// ExecReader returns when the command's exit code arrives or the stream
// ends, even while a Read of r is still pending (a command that exits
// before reading all its stdin): that Read is left to return by itself,
// and what it returns is discarded. An HTTP request body does, when the
// handler returns and the server closes it.
func (c *Client) ExecReader(ctx context.Context, allocID, task string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error) {
	start := time.Now()
	if _, inMemory := stdin.(*bytes.Reader); !inMemory {
		src := stdin // the goroutine's own copy: stdin is the pipe below
		pr, pw := io.Pipe()
		go func() { _, err := io.Copy(pw, src); pw.CloseWithError(err) }()
		stdin = pr // exec closes it before returning, ending the copy's next write
	}
	exitCode, err = c.exec(ctx, allocID, task, argv, stdin, stdout, stderr)
	c.observe(OpExec, start, err)
	return exitCode, err
}

func (c *Client) exec(ctx context.Context, allocID, task string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if !validID(allocID) {
		return -1, c.newError(OpExec, 0, fmt.Sprintf("invalid allocation id %q", allocID), ErrNotFound)
	}
	if task == "" || len(argv) == 0 {
		return -1, c.newError(OpExec, 0, "task and argv are required", nil)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	conn, err := c.dialExec(ctx, allocID, task, argv)
	if err != nil {
		return -1, err
	}
	var stdinClosed atomic.Bool
	stopWatch := context.AfterFunc(ctx, func() {
		if pr, ok := stdin.(*io.PipeReader); ok && !stdinClosed.Load() {
			// ExecReader's stream, still being read: the failed Read makes
			// sendInput close the command's stdin, then the connection;
			// the timer is the backstop for a sendInput stuck in a write.
			_ = pr.CloseWithError(ctx.Err())
			time.AfterFunc(execCloseGrace, func() { _ = conn.Close() })
			return
		}
		_ = conn.Close()
	})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { sendInput(conn, stdin, done, &stdinClosed) })
	defer func() {
		stopWatch()
		close(done)
		_ = conn.Close()
		if pr, ok := stdin.(*io.PipeReader); ok { // ExecReader's: unblock a pending Read
			_ = pr.Close()
		}
		wg.Wait()
	}()

	code, err := c.readOutput(conn, stdout, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("nomad: %s: %w", OpExec, ctx.Err())
		}
		return -1, err
	}
	_ = conn.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(execCloseGrace))
	return code, nil
}

// dialExec opens the exec WebSocket. The handshake is bounded by the
// per-call Timeout (the dialer's) and abandoned as soon as ctx ends.
func (c *Client) dialExec(ctx context.Context, allocID, task string, argv []string) (*websocket.Conn, error) {
	command, err := json.Marshal(argv)
	if err != nil {
		return nil, c.newError(OpExec, 0, err.Error(), nil)
	}
	u := *c.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = "/v1/client/allocation/" + allocID + "/exec"
	v := url.Values{"task": {task}, "tty": {"false"}, "command": {string(command)}}
	if c.cfg.Region != "" {
		v.Set("region", c.cfg.Region)
	}
	if c.cfg.Namespace != "" {
		v.Set("namespace", c.cfg.Namespace)
	}
	u.RawQuery = v.Encode()
	header := http.Header{}
	if c.cfg.Token != "" {
		header.Set("X-Nomad-Token", c.cfg.Token)
	}

	conn, resp, err := c.dialCtx(ctx, u.String(), header)
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err == nil {
		conn.SetReadLimit(execReadLimit)
		return conn, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("nomad: %s: %w", OpExec, ctx.Err())
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxMsg))
		return nil, c.statusError(OpExec, resp.StatusCode, string(body))
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return nil, c.newError(OpExec, 0, fmt.Sprintf("no handshake within %s", c.cfg.Timeout), ErrUnavailable)
	}
	return nil, c.newError(OpExec, 0, err.Error(), ErrUnavailable)
}

// dialCtx is Dialer.DialContext that also gives up as soon as ctx ends:
// gorilla/websocket honours only ctx's deadline once connected, so the
// connection is closed under it when ctx is cancelled.
func (c *Client) dialCtx(ctx context.Context, urlStr string, header http.Header) (*websocket.Conn, *http.Response, error) {
	var (
		mu  sync.Mutex
		raw net.Conn
	)
	d := *c.dialer
	netDial := d.NetDialContext
	if netDial == nil {
		netDial = (&net.Dialer{}).DialContext
	}
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := netDial(ctx, network, addr)
		if err == nil {
			mu.Lock()
			raw = conn
			mu.Unlock()
		}
		return conn, err
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if raw != nil {
			_ = raw.Close()
		}
	})
	conn, resp, err := d.DialContext(ctx, urlStr, header)
	if !stop() && err == nil { // ctx ended as the handshake completed
		_ = conn.Close()
		return nil, resp, ctx.Err()
	}
	return conn, resp, err
}

// isTimeout reports a net.Error timeout (a handshake deadline).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sendInput writes stdin in chunks, then the stdin close (and sets
// closed), then a heartbeat every execHeartbeat until done. Write errors end
// it silently: the read side sees the broken stream. A read error of stdin
// sends the stdin close too, then closes the connection, so the read side
// sees the stream broken while the command sees its stdin end: Nomad would
// leave it open (a command checking what it received sees it cut short).
func sendInput(conn *websocket.Conn, stdin io.Reader, done <-chan struct{}, closed *atomic.Bool) {
	send := func(in api.ExecStreamingInput) bool {
		b, err := json.Marshal(in)
		return err == nil && conn.WriteMessage(websocket.TextMessage, b) == nil
	}
	closeStdin := func() bool {
		ok := send(api.ExecStreamingInput{Stdin: &api.ExecStreamingIOOperation{Close: true}})
		closed.Store(true)
		return ok
	}
	buf := make([]byte, execStdinChunk)
	for {
		n, err := stdin.Read(buf)
		if n > 0 && !send(api.ExecStreamingInput{Stdin: &api.ExecStreamingIOOperation{Data: buf[:n]}}) {
			return
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			closeStdin()
			_ = conn.Close()
			return
		}
		select {
		case <-done:
			return
		default:
		}
	}
	if !closeStdin() {
		return
	}
	tick := time.NewTicker(execHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if !send(api.ExecStreamingInput{}) {
				return
			}
		}
	}
}

// readOutput copies output frames until the exited frame and returns the
// exit code ("result":{} is exit code 0).
func (c *Client) readOutput(conn *websocket.Conn, stdout, stderr io.Writer) (int, error) {
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return -1, c.execReadError(err)
		}
		var f api.ExecStreamingOutput
		if err := json.Unmarshal(data, &f); err != nil {
			return -1, c.newError(OpExec, 0, "malformed frame: "+err.Error(), ErrExecDropped)
		}
		if f.Stdout != nil && len(f.Stdout.Data) > 0 {
			if _, err := stdout.Write(f.Stdout.Data); err != nil {
				return -1, c.newError(OpExec, 0, "writing stdout: "+err.Error(), nil)
			}
		}
		if f.Stderr != nil && len(f.Stderr.Data) > 0 {
			if _, err := stderr.Write(f.Stderr.Data); err != nil {
				return -1, c.newError(OpExec, 0, "writing stderr: "+err.Error(), nil)
			}
		}
		if f.Exited {
			if f.Result == nil {
				return -1, c.newError(OpExec, 0, "exited frame without a result", ErrExecDropped)
			}
			return f.Result.ExitCode, nil
		}
	}
}

// execReadError classifies the end of an exec stream that came before the
// exit code.
func (c *Client) execReadError(err error) error {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return c.newError(OpExec, 0, "stream broken: "+err.Error(), ErrExecDropped)
	}
	switch ce.Code {
	case websocket.ClosePolicyViolation:
		if noPathToNode(ce.Text) {
			return c.newError(OpExec, ce.Code, ce.Text, ErrNodeUnreachable)
		}
		return c.newError(OpExec, ce.Code, ce.Text, ErrNotFound)
	case websocket.CloseInternalServerErr:
		// Nomad's wording for a command that could not start (recorded in
		// exec-command-not-found.json); other 1011s are failures of the task.
		var sentinel error
		if strings.Contains(ce.Text, "failed to start command") {
			sentinel = ErrCommandNotStarted
		}
		return c.newError(OpExec, ce.Code, orDefault(ce.Text, "exec failed in the task"), sentinel)
	default:
		msg := "closed with code " + fmt.Sprint(ce.Code)
		if ce.Text != "" {
			msg += ": " + ce.Text
		}
		return c.newError(OpExec, ce.Code, msg, ErrExecDropped)
	}
}
