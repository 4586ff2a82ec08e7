package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/render/execwrap"
	"sandgate/store"
)

// killAfter is how long the in-sandbox wrapper waits, after SIGTERM to the
// timed-out command's process group, before SIGKILL.
const killAfter = 5 * time.Second

// execSandbox is POST /v1/sandboxes/{id}/exec.
func (s *Server) execSandbox(c echo.Context) error {
	rec, err := recordOf(c)
	if err != nil {
		return err
	}
	body := bodyOf[*execRequest](c)
	if body == nil {
		return invalid("body", "a JSON object is required")
	}
	if rec.State != store.StateRunning || rec.AllocID == "" {
		return notRunning(rec.ID, rec.State)
	}
	st := s.cfg.Engine.Settings()
	timeout := time.Duration(deref(body.TimeoutSeconds, int64(st.Exec.DefaultTimeoutSeconds))) * time.Second
	wrapped := execwrap.Command{
		Argv: body.Argv, Env: body.Env, Workdir: deref(body.Workdir, ""), Timeout: timeout, KillAfter: killAfter,
	}
	argv := wrapped.Args()
	stdin, _ := body.stdinBytes() // check refused one that does not decode
	limit := int64(st.Exec.MaxOutputBytes)
	if body.MaxOutputBytes != nil { // E2 holds it in [1, exec.max_output_bytes]
		limit = *body.MaxOutputBytes
	}
	if wantsEventStream(c) {
		return s.execStream(c, rec, wrapped, stdin, timeout, limit)
	}
	stdout, stderr := newCappedBuffer(limit), newCappedBuffer(limit)
	// The wrapper stops the command at the timeout and is gone within
	// killAfter; the stream is given up only after a grace period beyond.
	ctx, cancel := context.WithTimeout(c.Request().Context(), timeout+killAfter+s.cfg.ExecGrace)
	defer cancel()
	start := time.Now()
	code, err := s.cfg.Nomad.Exec(ctx, rec.AllocID, s.taskName, argv, stdin, stdout, stderr)
	elapsed := time.Since(start)
	res := wire.ExecResult{DurationMS: elapsed.Milliseconds()}
	switch {
	case err == nil:
		res.ExitCode = &code
		// The gateway's own deadline decides, never the exit status: a
		// command that exits 124 by itself did not time out, and busybox
		// and GNU report a kill with 143 or 137.
		res.TimedOut = elapsed >= timeout
	case errors.Is(err, context.DeadlineExceeded) && c.Request().Context().Err() == nil:
		res.TimedOut = true
	case errors.Is(err, nomad.ErrCommandNotStarted):
		msg := err.Error()
		if ne := (*nomad.Error)(nil); errors.As(err, &ne) {
			msg = ne.Msg
		}
		n := 127
		res.ExitCode = &n
		stderr.reset([]byte("sandgate: Nomad could not start the command: " + msg + "\n"))
	case c.Request().Context().Err() != nil:
		return err // the caller went away; nobody reads an answer
	default:
		// Nomad could not serve the exec (a node that is down answers
		// "No path to node"): what became of the allocation decides.
		return s.streamFailed(c.Request().Context(), rec, "the exec stream (the command may still be running until its timeout)", err)
	}
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = stdout.result()
	res.Stderr, res.StderrBytes, res.StderrTruncated = stderr.result()
	res.Truncated = res.StdoutTruncated || res.StderrTruncated
	return c.JSON(http.StatusOK, res)
}

// sandboxLogs is GET /v1/sandboxes/{id}/logs: a bounded tail of the task's
// stdout or stderr, as text.
func (s *Server) sandboxLogs(c echo.Context) error {
	rec, err := recordOf(c)
	if err != nil {
		return err
	}
	if rec.AllocID == "" {
		return notRunning(rec.ID, rec.State)
	}
	st := s.cfg.Engine.Settings()
	q, err := logsQuery(c)
	if err != nil {
		return err
	}
	stream := q.Stream
	switch stream {
	case "":
		stream = "stdout"
	case "stdout", "stderr":
	default:
		// E3 refuses it; with E3 in warn or dryrun mode the policy lets it
		// through, and Nomad knows no other stream.
		return invalid("stream", "must be stdout or stderr, got %q", clip.String(stream, 32))
	}
	tail := int64(st.Exec.MaxLogsTailBytes)
	if q.TailBytes != nil {
		tail = *q.TailBytes
	}
	data, err := s.cfg.Nomad.Logs(c.Request().Context(), rec.AllocID, s.taskName, stream, tail)
	switch {
	case errors.Is(err, nomad.ErrNotFound) && rec.State == store.StateRunning:
		data = nil // Nomad answers 404 until the task has written anything
	case errors.Is(err, nomad.ErrNotFound):
		return notRunning(rec.ID, "gone from Nomad (its logs were garbage-collected)")
	case err != nil && rec.State == store.StateRunning:
		// e.g. "No path to node": what became of the allocation decides.
		return s.streamFailed(c.Request().Context(), rec, "the logs", err)
	case err != nil:
		return nomadUnavailable("Nomad did not return the logs", err)
	}
	if int64(len(data)) > tail { // the client bounds it too; never trust one layer
		data = data[int64(len(data))-tail:]
	}
	c.Response().Header().Set("X-Sandgate-Stream", stream)
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", data)
}

// cappedBuffer keeps the first limit bytes written and counts the rest.
type cappedBuffer struct {
	limit int64
	buf   []byte
	total int64
}

func newCappedBuffer(limit int64) *cappedBuffer { return &cappedBuffer{limit: limit} }

// Write never fails: the stream must be drained to reach the exit code.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if room := b.limit - int64(len(b.buf)); room > 0 {
		if int64(len(p)) > room {
			b.buf = append(b.buf, p[:room]...)
		} else {
			b.buf = append(b.buf, p...)
		}
	}
	return len(p), nil
}

func (b *cappedBuffer) reset(p []byte) { b.buf, b.total = nil, 0; _, _ = b.Write(p) }

// result returns the kept text (a cut multi-byte character at the end is
// dropped, so the JSON string stays valid UTF-8), the total and whether
// anything was cut.
func (b *cappedBuffer) result() (string, int64, bool) {
	kept := b.buf
	truncated := b.total > int64(len(kept))
	if truncated {
		for i := 0; i < utf8.UTFMax && len(kept) > 0; i++ {
			r, size := utf8.DecodeLastRune(kept)
			if r != utf8.RuneError || size != 1 {
				break
			}
			kept = kept[:len(kept)-1]
		}
	}
	return string(kept), b.total, truncated
}

// execRequest is POST /v1/sandboxes/{id}/exec.
type execRequest wire.ExecRequest

func (r *execRequest) required() bool { return true }

// stdinBytes returns what the command reads on stdin, decoding
// stdin_base64. It decodes on each call (policyBody, check and the
// handler): the body limit bounds each decoding, and the wire type has no
// room to keep the result.
func (r *execRequest) stdinBytes() ([]byte, error) {
	switch {
	case r.StdinBase64 != nil:
		return base64.StdEncoding.DecodeString(*r.StdinBase64)
	case r.Stdin != nil:
		return []byte(*r.Stdin), nil
	}
	return nil, nil
}

func (r *execRequest) policyBody() policies.RequestBody {
	b := policies.RequestBody{Argv: r.Argv, TimeoutSeconds: r.TimeoutSeconds, MaxOutputBytes: r.MaxOutputBytes}
	if r.Stdin != nil || r.StdinBase64 != nil {
		in, err := r.stdinBytes()
		n := int64(len(in))
		if err != nil { // refused by check as 400; the bound holds meanwhile
			n = int64(len(*r.StdinBase64))
		}
		b.StdinBytes = &n
	}
	if r.Env != nil {
		n, size := int64(len(r.Env)), int64(0)
		names := make([]string, 0, len(r.Env))
		for k, v := range r.Env {
			size += int64(len(k) + 1 + len(v))
			names = append(names, k)
		}
		slices.Sort(names)
		b.EnvCount, b.EnvBytes, b.EnvNames = &n, &size, names
	}
	b.Workdir = r.Workdir
	return b
}

// check refuses what the wrapper cannot carry, whatever the policy
// allows; the policy judges names (E1: exec.env_name_pattern and
// exec.reserved_env_prefixes), sizes (E1, E2) and the workdir (E1: a
// normalised absolute path under one of exec.workdir_roots). The workdir
// test here only adds a refusal under a bundle that would let a relative
// or NUL-holding path through: it is never what confines the workdir.
func (r *execRequest) check(*Server) error {
	if len(r.Argv) > 0 && strings.Contains(r.Argv[0], "=") {
		return invalid("argv[0]", "must name a program, not an assignment (no '=')")
	}
	if r.Stdin != nil && r.StdinBase64 != nil {
		return invalid("stdin_base64", "give stdin or stdin_base64, not both")
	}
	if _, err := r.stdinBytes(); err != nil {
		return invalid("stdin_base64", "is not standard base64 (RFC 4648, with padding): %v", err)
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid("env", "name %q must be non-empty, without '=' or NUL", k)
		}
		if strings.ContainsRune(v, 0) {
			return invalid("env."+k, "must not contain a NUL byte")
		}
	}
	if r.Workdir != nil {
		w := *r.Workdir
		if !strings.HasPrefix(w, "/") || strings.ContainsRune(w, 0) {
			return invalid("workdir", "must be an absolute path without NUL bytes")
		}
	}
	return nil
}

// logsQuery reads ?stream=&tail_bytes= for the policy; a tail_bytes that
// is not an integer is a 400 naming it.
func logsQuery(c echo.Context) (policies.RequestQuery, error) {
	var q policies.RequestQuery
	q.Stream = c.QueryParam("stream")
	if v := c.QueryParam("tail_bytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return q, invalid("tail_bytes", "must be an integer, got %q", clip.String(v, 32))
		}
		q.TailBytes = &n
	}
	return q, nil
}
