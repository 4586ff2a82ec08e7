package nomadsim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// Exec protocol constants (see the README of the recordings).
const (
	execFrameSize  = 32 << 10              // max data bytes per output frame
	execStdinLimit = 4 << 20               // stdin buffered for a command that does not read it
	ttySetup       = 20 * time.Millisecond // a tty hang-up before this means exit 129, no output
	exitHangup     = 128 + 1               // SIGHUP
	closeWait      = time.Second           // how long to wait for the client's close echo
	writeTimeout   = 10 * time.Second
	maxCloseReason = 123 // RFC 6455 limit for a close frame's reason
)

// execProc is an exec'd command. Its fields are guarded by Server.mu.
type execProc struct {
	socketClosed bool
}

// RunningExecs returns how many exec'd commands are still running although
// their WebSocket has closed. Like on a real agent, closing the socket does
// not stop a command; stopping the allocation (or Close) does.
func (s *Server) RunningExecs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p := range s.procs {
		if p.socketClosed {
			n++
		}
	}
	return n
}

// execSession is one exec WebSocket.
type execSession struct {
	conn        *websocket.Conn
	wmu         sync.Mutex
	stdoutFirst bool // send the stdout close frame before stderr's
}

// exitFrame is the exited frame. Unlike api.ExecStreamingExitResult it
// omits exit_code 0 ("result":{}), as the agent does.
type exitFrame struct {
	Exited bool `json:"exited"`
	Result struct {
		ExitCode int `json:"exit_code,omitempty"`
	} `json:"result"`
}

func (e *execSession) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	_ = e.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return e.conn.WriteMessage(websocket.TextMessage, b)
}

func (e *execSession) sendClose(code int, reason string) {
	if len(reason) > maxCloseReason {
		reason = reason[:maxCloseReason]
	}
	_ = e.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(writeTimeout))
}

// fail ends a session that never started a command: a close frame, then the
// client's echo, like exec-unknown-alloc.json and exec-unknown-task.json.
func (e *execSession) fail(code int, reason string) {
	e.sendClose(code, reason)
	_ = e.conn.SetReadDeadline(time.Now().Add(closeWait))
	for {
		if _, _, err := e.conn.ReadMessage(); err != nil {
			return
		}
	}
}

// streamWriter turns command output into stdout/stderr data frames.
type streamWriter struct {
	e      *execSession
	stderr bool
	crlf   bool // tty: \n becomes \r\n
}

func (w *streamWriter) Write(b []byte) (int, error) {
	n := len(b)
	if w.crlf {
		b = []byte(strings.ReplaceAll(string(b), "\n", "\r\n"))
	}
	for len(b) > 0 {
		chunk := b[:min(len(b), execFrameSize)]
		b = b[len(chunk):]
		op := &api.ExecStreamingIOOperation{Data: chunk}
		out := api.ExecStreamingOutput{Stdout: op}
		if w.stderr {
			out = api.ExecStreamingOutput{Stderr: op}
		}
		_ = w.e.send(out) // a gone client does not stop the command
	}
	return n, nil
}

// handleExec serves the alloc exec WebSocket. Errors found before a command
// starts arrive after the 101 as a close frame: 1008 for not-found kinds,
// 1011 otherwise (the agent's toWsCode).
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request, allocID string) {
	q := r.URL.Query()
	var command []string
	if err := json.Unmarshal([]byte(q.Get("command")), &command); err != nil {
		writeError(w, r, http.StatusInternalServerError, fmt.Sprintf("failed to marshal command into json: %v", err))
		return
	}
	tty := false
	if v := q.Get("tty"); v != "" {
		var err error
		if tty, err = strconv.ParseBool(v); err != nil {
			writeError(w, r, http.StatusInternalServerError, fmt.Sprintf("tty value is not a boolean: %v", err))
			return
		}
	}
	task := q.Get("task")
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	e := &execSession{conn: conn}
	defer func() { _ = conn.Close() }()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		e.fail(websocket.CloseInternalServerErr, errClosed.Error())
		return
	}
	s.conns[conn] = struct{}{}
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	code, reason, sa, env := s.execCheckLocked(allocID, task, command)
	var t *api.Task
	if sa != nil {
		t = allocTask(sa.a, task)
	}
	s.mu.Unlock()
	if code != 0 {
		e.fail(code, reason)
		return
	}
	// The docker driver closes stdout before stderr (every real-exec-*.json);
	// raw_exec closes stderr first (exec-*.json).
	e.stdoutFirst = t != nil && t.Driver == "docker"
	s.runExec(e, sa, command, env, tty, busyboxImage(t))
}

// execCheckLocked validates an exec request in the client's order and
// returns a close code and reason on failure, else the allocation and the
// task's environment.
func (s *Server) execCheckLocked(allocID, task string, command []string) (int, string, *simAlloc, []string) {
	const notFound, internal = websocket.ClosePolicyViolation, websocket.CloseInternalServerErr
	sa := s.allocs[allocID]
	switch {
	case sa == nil:
		return notFound, errUnknownAlloc(allocID), nil, nil
	case s.nodeUnreachableLocked(sa.a.NodeID):
		// The server has no connection to the node's client
		// (real-lost-exec-node-down.json: at once, 1008).
		return notFound, errNoPathToNode, nil, nil
	case task == "":
		return notFound, "must provide task name", nil, nil
	case len(command) == 0:
		return notFound, "command is not present", nil, nil
	}
	ts := sa.a.TaskStates[task]
	switch {
	case ts == nil:
		return internal, "task not found", nil, nil
	case ts.StartedAt.IsZero():
		return notFound, fmt.Sprintf("task %q not started yet.", task), nil, nil
	case ts.State != "running" || sa.ctx.Err() != nil:
		return notFound, fmt.Sprintf("task %q is not running.", task), nil, nil
	}
	if _, ok := lookupBuiltin(command[0]); !ok {
		why := "executable file not found in $PATH"
		if strings.Contains(command[0], "/") {
			why = fmt.Sprintf("stat %s: no such file or directory", command[0])
		}
		return internal, fmt.Sprintf("rpc error: code = Unknown desc = failed to start command: exec: %q: %s", command[0], why), nil, nil
	}
	var extra map[string]string
	if sa.a.Job != nil {
		for _, tg := range sa.a.Job.TaskGroups {
			for _, t := range tg.Tasks {
				if deref(tg.Name) == sa.a.TaskGroup && t.Name == task {
					extra = t.Env
				}
			}
		}
	}
	return 0, "", sa, taskEnv(sa.a.ID, sa.a.Name, sa.a.JobID, sa.a.TaskGroup, task, extra)
}

// runExec runs the command and speaks the frame protocol. With tty=false
// nothing terminal is sent before the client closes stdin, even when the
// command is done; with tty=true the exit follows the command and a stdin
// close hangs the terminal up (exit 129).
func (s *Server) runExec(e *execSession, sa *simAlloc, command, env []string, tty, busybox bool) {
	stdin := &stdinPipe{wake: make(chan struct{})}
	stdinClosed := make(chan struct{})
	readerDone := make(chan struct{})
	go func() { // ends when the connection does; handleExec closes it
		defer close(readerDone)
		var once sync.Once
		for {
			_, msg, err := e.conn.ReadMessage()
			if err != nil {
				return
			}
			var in api.ExecStreamingInput
			if json.Unmarshal(msg, &in) != nil || in.Stdin == nil {
				continue // heartbeat, tty_size or junk
			}
			if len(in.Stdin.Data) > 0 {
				stdin.write(in.Stdin.Data)
			}
			if in.Stdin.Close {
				stdin.close()
				once.Do(func() { close(stdinClosed) })
			}
		}
	}()

	if tty {
		t := time.NewTimer(ttySetup)
		select {
		case <-t.C:
		case <-stdinClosed:
			t.Stop()
			e.finish(exitHangup, true, true)
			e.awaitEcho(readerDone)
			return
		case <-readerDone:
			t.Stop()
			return
		}
	}

	ctx, kill := context.WithCancel(sa.ctx)
	ep := &execProc{}
	exitCh := make(chan int, 1)
	out := &streamWriter{e: e, crlf: tty}
	errw := &streamWriter{e: e, stderr: !tty, crlf: tty}
	p := &proc{ctx: ctx, args: command, env: env, cwd: "/", stdin: &stdinReader{p: stdin, ctx: ctx}, stdout: out, stderr: errw, busybox: busybox, fs: sa.containerFS(time.Now)}
	fn, _ := lookupBuiltin(command[0])
	s.mu.Lock()
	s.procs[ep] = struct{}{}
	started := s.spawnLocked(func() {
		code := fn(p)
		s.mu.Lock()
		delete(s.procs, ep)
		s.mu.Unlock()
		kill()
		exitCh <- code
	})
	s.mu.Unlock()
	if !started {
		kill()
		e.fail(websocket.CloseInternalServerErr, errClosed.Error())
		return
	}

	var code int
	exited, stdinDone, hungUp, stopped := false, false, false, false
	stdinCh := (<-chan struct{})(stdinClosed)
	allocDone := sa.ctx.Done()
	// Done once the command exited and, without a tty, stdin was closed (or
	// the allocation stopped, which ends the session regardless).
	for !exited || (!tty && !stdinDone && !stopped) {
		select {
		case code = <-exitCh:
			exited = true
		case <-allocDone:
			allocDone, stopped = nil, true
		case <-stdinCh:
			stdinCh, stdinDone = nil, true
			if tty && !exited {
				hungUp = true
				kill()
			}
		case <-readerDone:
			s.mu.Lock()
			if _, running := s.procs[ep]; running {
				ep.socketClosed = true
			}
			s.mu.Unlock()
			return
		}
	}
	if hungUp {
		code = exitHangup
	}
	s.mu.Lock()
	dropped := stopped && sa.dropped
	s.mu.Unlock()
	if dropped {
		// The node went down: the server loses the client's stream and
		// closes the socket normally, with no exit code
		// (real-lost-exec-in-flight.json).
		e.sendClose(websocket.CloseNormalClosure, "")
		e.awaitEcho(readerDone)
		return
	}
	e.finish(code, tty, hungUp)
	e.awaitEcho(readerDone)
}

// finish sends the end of a session: the stream close frames (stderr first,
// or stdout first for docker tasks; none for stderr in tty mode, none at all after a tty hang-up, as in
// exec-tty-echo-hi-stdin-closed-at-once.json), the exited frame and close
// 1000.
func (e *execSession) finish(code int, tty, hungUp bool) {
	closeStderr := func() {
		if !tty {
			_ = e.send(api.ExecStreamingOutput{Stderr: &api.ExecStreamingIOOperation{Close: true}})
		}
	}
	if !e.stdoutFirst {
		closeStderr()
	}
	if !hungUp {
		_ = e.send(api.ExecStreamingOutput{Stdout: &api.ExecStreamingIOOperation{Close: true}})
	}
	if e.stdoutFirst {
		closeStderr()
	}
	f := exitFrame{Exited: true}
	f.Result.ExitCode = code
	_ = e.send(f)
	e.sendClose(websocket.CloseNormalClosure, "")
}

func (e *execSession) awaitEcho(readerDone <-chan struct{}) {
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-readerDone:
	case <-t.C:
	}
}

// stdinPipe buffers stdin frames for a command; writes never block.
type stdinPipe struct {
	mu     sync.Mutex
	buf    []byte
	closed bool
	wake   chan struct{} // closed (and replaced) on every change
}

func (p *stdinPipe) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.buf)+len(b) > execStdinLimit {
		return
	}
	p.buf = append(p.buf, b...)
	close(p.wake)
	p.wake = make(chan struct{})
}

func (p *stdinPipe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		close(p.wake)
		p.wake = make(chan struct{})
	}
}

// stdinReader reads a stdinPipe until it closes (io.EOF) or the command is
// killed (errKilled).
type stdinReader struct {
	p   *stdinPipe
	ctx context.Context
}

func (r *stdinReader) Read(b []byte) (int, error) {
	for {
		r.p.mu.Lock()
		if len(r.p.buf) > 0 {
			n := copy(b, r.p.buf)
			r.p.buf = r.p.buf[n:]
			r.p.mu.Unlock()
			return n, nil
		}
		if r.p.closed {
			r.p.mu.Unlock()
			return 0, io.EOF
		}
		wake := r.p.wake
		r.p.mu.Unlock()
		select {
		case <-wake:
		case <-r.ctx.Done():
			return 0, errKilled
		}
	}
}
