package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/nomad"
	"sandgate/render/execwrap"
	"sandgate/store"
)

// Server-Sent Events of a streaming exec (POST .../exec with Accept:
// text/event-stream). Every event has a sequence id; the stream is start,
// then stdout, stderr and keepalive events, then exactly one terminal event:
// exit (what the command returned, as the gateway saw it) or error (typed:
// sandbox_lost, nomad_unavailable, timeout, cancelled). An exit event is
// written only for an exit status Nomad reported.
//
// The event names, the error codes and the events' objects are wire's
// (Event*, Stream*, Exec*, StreamError).

// wantsEventStream reports whether the caller asked for the exec as SSE.
func wantsEventStream(c echo.Context) bool {
	for _, part := range strings.Split(c.Request().Header.Get(echo.HeaderAccept), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			return true
		}
	}
	return false
}

// chunk is output read from the exec stream.
type chunk struct {
	stream string
	data   []byte
}

// streamWriter hands one stream's output to the event loop, keeping at
// most limit bytes of it and counting all of it.
type streamWriter struct {
	ctx    context.Context
	stream string
	limit  int64
	sent   int64
	total  int64
	out    chan<- chunk
}

// Write never fails while the stream runs: the exec must be drained to
// reach its exit status.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	room := w.limit - w.sent
	if room <= 0 || len(p) == 0 {
		return len(p), nil
	}
	keep := p
	if int64(len(keep)) > room {
		keep = keep[:room]
	}
	w.sent += int64(len(keep))
	select {
	case w.out <- chunk{w.stream, append([]byte(nil), keep...)}:
	case <-w.ctx.Done():
	}
	return len(p), nil
}

func (w *streamWriter) truncated() bool { return w.total > w.sent }

// sse writes events to the response with increasing ids.
type sse struct {
	w   *echo.Response
	seq int
}

func (e *sse) send(event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		b = []byte(`{}`)
	}
	e.seq++
	_, _ = fmt.Fprintf(e.w, "id: %d\nevent: %s\ndata: %s\n\n", e.seq, event, b)
	e.w.Flush()
}

// execStream runs argv as a streaming exec. The command's output goes out
// as it arrives; a quiet command gets a keepalive every KeepaliveInterval;
// the stream ends with one exit or error event within timeout, the
// wrapper's kill delay and ExecGrace, whatever Nomad does.
func (s *Server) execStream(c echo.Context, rec store.Sandbox, cmd execwrap.Command, stdin []byte, timeout time.Duration, limit int64) error {
	// The command's tree carries the exec's id, so that a caller who goes
	// away can have it stopped (Nomad does not stop it when the stream
	// closes). The policy judged the caller's env; this name is reserved.
	execID := randomHex(12)
	env := make(map[string]string, len(cmd.Env)+1)
	maps.Copy(env, cmd.Env)
	env[execwrap.ExecIDEnv] = execID
	cmd.Env = env
	argv := cmd.Args()
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "text/event-stream")
	res.Header().Set("X-Accel-Buffering", "no")
	res.WriteHeader(http.StatusOK)
	ev := &sse{w: res}
	ev.send(wire.EventStart, wire.ExecStart{SandboxID: rec.ID, TimeoutSeconds: int64(timeout / time.Second), MaxOutputBytes: limit})

	reqCtx := c.Request().Context()
	ctx, cancel := context.WithTimeout(reqCtx, timeout+killAfter+s.cfg.ExecGrace)
	defer cancel()
	chunks := make(chan chunk, 16)
	stdout := &streamWriter{ctx: ctx, stream: wire.EventStdout, limit: limit, out: chunks}
	stderr := &streamWriter{ctx: ctx, stream: wire.EventStderr, limit: limit, out: chunks}
	type outcome struct {
		code int
		err  error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		code, err := s.cfg.Nomad.Exec(ctx, rec.AllocID, s.taskName, argv, stdin, stdout, stderr)
		done <- outcome{code, err}
	}()
	keepalive := time.NewTicker(s.cfg.KeepaliveInterval)
	defer keepalive.Stop()
	emit := func(ch chunk) {
		out := wire.ExecOutput{Data: string(ch.data), Encoding: "utf-8"}
		if !utf8.Valid(ch.data) {
			out = wire.ExecOutput{Data: base64.StdEncoding.EncodeToString(ch.data), Encoding: "base64"}
		}
		ev.send(ch.stream, out)
		keepalive.Reset(s.cfg.KeepaliveInterval)
	}
	for {
		select {
		case ch := <-chunks:
			emit(ch)
		case <-keepalive.C:
			ev.send(wire.EventKeepalive, wire.ExecKeepalive{ElapsedMS: time.Since(start).Milliseconds()})
		case o := <-done:
			// Exec has returned: every chunk it wrote is in the channel.
			for drained := false; !drained; {
				select {
				case ch := <-chunks:
					emit(ch)
				default:
					drained = true
				}
			}
			elapsed := time.Since(start)
			// The caller went away: nobody reads on, so stop what it
			// started, before asking Nomad anything else.
			if reqCtx.Err() != nil {
				if o.err != nil {
					s.stopStreamedExec(rec, execID)
				}
				return nil
			}
			// A sandbox that ended meanwhile (destroyed, expired, reclaimed)
			// killed the command: its status is not the command's answer.
			if ended, ok := s.endedMeanwhile(reqCtx, rec, o.code, o.err); ok {
				ev.send(wire.EventError, ended)
				return nil
			}
			if o.err == nil || errors.Is(o.err, nomad.ErrCommandNotStarted) {
				code := o.code
				if o.err != nil {
					msg := o.err.Error()
					if ne := (*nomad.Error)(nil); errors.As(o.err, &ne) {
						msg = ne.Msg
					}
					ev.send(wire.EventStderr, wire.ExecOutput{Data: "sandgate: Nomad could not start the command: " + msg + "\n", Encoding: "utf-8"})
					code = 127
				}
				ev.send(wire.EventExit, wire.ExecExit{
					ExitCode: code, TimedOut: elapsed >= timeout,
					StdoutBytes: stdout.total, StderrBytes: stderr.total,
					StdoutTruncated: stdout.truncated(), StderrTruncated: stderr.truncated(),
					DurationMS: elapsed.Milliseconds(),
				})
				return nil
			}
			ev.send(wire.EventError, s.streamError(reqCtx, rec, o.err))
			return nil
		}
	}
}

// endedMeanwhile reports, as an error event, a sandbox that ended while
// its command streamed: its record is no longer live, or, when the command
// died of a signal (status 128+n) or the stream broke, Nomad is stopping or
// has ended its allocation (a destroy stops the job before it records the
// end). A node that is down is not an end: streamError says
// nomad_unavailable.
func (s *Server) endedMeanwhile(reqCtx context.Context, rec store.Sandbox, code int, execErr error) (wire.StreamError, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 10*time.Second)
	defer cancel()
	now, err := s.cfg.Store.Get(ctx, rec.ID)
	if err == nil && !now.State.Live() {
		return wire.StreamError{Code: wire.StreamSandboxLost, Detail: fmt.Sprintf("the sandbox ended (%s) while the command ran", orText(now.EndReason, string(now.State)))}, true
	}
	if (execErr == nil && code < 128) || errors.Is(execErr, context.DeadlineExceeded) {
		return wire.StreamError{}, false // a silent Nomad is not asked again: the deadline has passed
	}
	f, detail, err := s.allocFate(ctx, rec)
	if err != nil || (f != fateStopping && f != fateLost) {
		return wire.StreamError{}, false
	}
	if execErr != nil {
		return wire.StreamError{Code: wire.StreamSandboxLost, Detail: "the exec stream ended as the sandbox went away: " + detail}, true
	}
	return wire.StreamError{Code: wire.StreamSandboxLost, Detail: fmt.Sprintf("the command was killed (status %d) as its sandbox went away: %s", code, detail)}, true
}

// stopStreamedExec kills, in the background, the process tree of the
// streaming exec execID, whose caller went away.
func (s *Server) stopStreamedExec(rec store.Sandbox, execID string) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
		defer cancel()
		code, err := s.cfg.Nomad.Exec(ctx, rec.AllocID, s.taskName, execwrap.StopArgs(execID), nil, io.Discard, io.Discard)
		if err != nil || code != 0 {
			s.log.Warn("a streaming exec's caller went away and its command could not be stopped; its timeout will", "sandbox", rec.ID, "exec", execID, "exit", code, "err", err)
			return
		}
		s.log.Info("a streaming exec's caller went away: its command was stopped", "sandbox", rec.ID, "exec", execID)
	}()
}

// streamError types the end of an exec stream that brought no exit status.
func (s *Server) streamError(reqCtx context.Context, rec store.Sandbox, err error) wire.StreamError {
	switch {
	case reqCtx.Err() != nil:
		return wire.StreamError{Code: wire.StreamCancelled, Detail: "the caller went away; the command is stopped"}
	case errors.Is(err, context.DeadlineExceeded):
		return wire.StreamError{Code: wire.StreamTimeout, Detail: "no exit status arrived within the timeout and the grace after it; the command was stopped at its timeout"}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 10*time.Second)
	defer cancel()
	var p *Problem
	if errors.As(s.streamFailed(ctx, rec, "the exec stream", err), &p) {
		switch p.Code {
		case wire.CodeSandboxLost, wire.CodeSandboxEnded, wire.CodeSandboxExpired:
			return wire.StreamError{Code: wire.StreamSandboxLost, Detail: p.Detail}
		default:
			return wire.StreamError{Code: wire.StreamNomadUnavailable, Detail: p.Detail}
		}
	}
	return wire.StreamError{Code: wire.StreamNomadUnavailable, Detail: "the exec stream broke: " + err.Error()}
}
