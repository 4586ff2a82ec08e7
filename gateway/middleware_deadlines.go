package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
)

// Connection deadlines (docs/api.md, Deadlines; docs/runbook.md, http.*).
//
// net/http's own ReadTimeout and WriteTimeout are whole-request bounds set
// once per request: a ReadTimeout shorter than a handler also cancels
// the handler's context (the server's background read of the connection
// fails at the deadline), and a WriteTimeout cuts every answer that takes
// longer to prepare, such as an exec or a create that waits for its
// allocation. So the http.Server keeps only ReadHeaderTimeout and
// IdleTimeout, and this middleware bounds each request's body and answer
// by what the client does, through http.ResponseController:
//
//   - reading the body: the time the gateway spends waiting for the
//     client's bytes may not exceed Config.ReadTimeout. A streamed body (a
//     file PUT of up to the policy's files.max_write_bytes) starts that
//     count again each time another streamProgressBytes arrive, so a
//     large upload at any reasonable rate is never cut while a client
//     that stops or trickles is. Once the body has been read to its end,
//     the connection has no read deadline left: a handler may run as long
//     as its own bounds allow (an SSE exec, a create that waits).
//   - writing the answer: each write (and flush) of the answer must be
//     taken by the client within Config.WriteTimeout; a stream that keeps
//     sending (SSE events, keepalives, a file's bytes) gets a new deadline
//     with each write, and a client that stops reading is cut.
//
// A body that does not arrive in time is answered 408 request_timeout
// (Connection: close) when the handler was reading it; when no handler
// reads it (a body sent to a route that takes none, a file PUT refused on
// its Content-Length), net/http reads what is left of it before the answer
// when that is at most 256 KiB (bounded by the same deadline), and
// otherwise sends the answer at once and closes the connection.

// streamProgressBytes is how much of a streamed body must arrive to start
// the read deadline's count again.
const streamProgressBytes = 64 << 10

// ctxDeadlineBody holds the request's *deadlineBody, when it has one.
const ctxDeadlineBody = "sandgate.deadline_body"

// errBodyTimeout is the read error of a body that did not arrive in time.
var errBodyTimeout = errors.New("gateway: the request body did not arrive within the read timeout")

// HTTPServer returns the http.Server that serves the gateway's API with
// the connection limits of Config: ReadHeaderTimeout, IdleTimeout and the
// header size limit (ServerHeaderLimit); the body and answer deadlines
// are the gateway's own (see deadlines). `sandgate serve`, `sandgate dev`
// and the in-process test gateway all serve through it. The caller sets
// TLSConfig and calls Serve.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.e,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    ServerHeaderLimit(s.cfg.MaxHeaderBytes),
	}
}

// deadlines bounds the request's body and answer by the client's progress
// (see above). It runs first on every request, routed or not. A request
// that is not on a connection (an MCP tool call's request to the REST
// handler, in process) has nothing to bound.
func (s *Server) deadlines(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		rc := http.NewResponseController(res.Writer)
		now := time.Now()
		if rc.SetWriteDeadline(now.Add(s.cfg.WriteTimeout)) != nil {
			return next(c)
		}
		res.Writer = &deadlineWriter{ResponseWriter: res.Writer, rc: rc, timeout: s.cfg.WriteTimeout}
		req := c.Request()
		if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
			// Until the handler reads, the deadline runs from now: it also
			// bounds net/http's discarding of a body nobody reads.
			_ = rc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
			orig := req.Body
			b := &deadlineBody{ReadCloser: orig, rc: rc, timeout: s.cfg.ReadTimeout}
			if c.Path() == filesRoute && req.Method == http.MethodPut {
				b.progress = streamProgressBytes
			}
			req.Body = b
			c.Set(ctxDeadlineBody, b)
			// net/http writes a buffered answer after the handler returns,
			// and first judges the unread rest of the body by its own type:
			// more than 256 KiB left is not read (the connection closes
			// after the answer), less is discarded. Behind the wrapper it
			// would read up to 256 KiB of any body, so a file PUT refused on
			// its Content-Length waited for bytes the client never sends
			// until the read deadline, and its 403 came 30 s late or not at
			// all. Give it back its own body once the handler is done.
			defer func() { req.Body = orig }()
		}
		return next(c)
	}
}

// bodyTimedOut reports whether the request's body failed to arrive in time.
func bodyTimedOut(c echo.Context) bool {
	b, _ := c.Get(ctxDeadlineBody).(*deadlineBody)
	return b != nil && b.timedOut.Load()
}

// deadlineBody is a request body whose reads are bounded by the client's
// progress. One goroutine reads it at a time (the handler, or the one
// that streams a file PUT into the sandbox).
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	// progress, when positive, is how many bytes start the count again.
	progress int64
	got      int64         // bytes since the count last started
	waited   time.Duration // time spent waiting in Read since then
	done     bool          // the body was read to its end
	timedOut atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	start := time.Now()
	_ = b.rc.SetReadDeadline(start.Add(b.timeout - b.waited))
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	if b.progress > 0 {
		if b.got += int64(n); b.got >= b.progress {
			b.got, b.waited = 0, 0
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		// The whole body is in: nothing more is read on this request, and
		// net/http's watch for the client going away must not time out.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut.Store(true)
		err = errBodyTimeout
	}
	return n, err
}

// deadlineWriter gives each write of the answer its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

// WriteHeader arms the deadline of the header's write (and of net/http's
// final flush when nothing else is written).
func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

// Write writes p within the write timeout.
func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// FlushError flushes within the write timeout (http.ResponseController
// and Echo's Response.Flush call it).
func (w *deadlineWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

// Flush implements http.Flusher.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestTimeout is the 408 of a body that did not arrive in time; the
// connection is closed after it (the body's end is unknown).
func requestTimeout() *Problem {
	return newProblem(http.StatusRequestTimeout, wire.CodeRequestTimeout,
		"the request body did not arrive within the gateway's read timeout (http.read_timeout, counted while the gateway waits for the client; a file upload restarts it with every 64 KiB); nothing was changed")
}
