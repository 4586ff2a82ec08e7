package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/render/fileops"
	"sandgate/store"
)

// filesRoute is GET (read a file, list a directory), PUT (write a file)
// and DELETE (remove one) of a path inside the sandbox. Each runs the
// fileops script over Nomad alloc exec in the task: no host path is ever
// mounted. The policy confines the path (F1) and bounds a write (F2); the
// script refuses a symbolic link that leaves files.roots.
const filesRoute = "/v1/sandboxes/:id/files"

// The headers every files answer carries, so that no limit is hidden: the
// policy's current files.* values.
const (
	headerMaxWriteBytes   = "X-Sandgate-Max-Write-Bytes"
	headerMaxReadBytes    = "X-Sandgate-Max-Read-Bytes"
	headerMaxListEntries  = "X-Sandgate-Max-List-Entries"
	headerFilesTimeout    = "X-Sandgate-Files-Timeout-Seconds"
	headerFileMode        = "X-Sandgate-File-Mode"
	headerFileSize        = "X-Sandgate-File-Size"
	headerFileOffset      = "X-Sandgate-File-Offset"
	headerFileModified    = "X-Sandgate-File-Modified"
	filesStderrLimit      = 4 << 10
	filesStatLimit        = 256
	filesListingLineLimit = 2*255 + 64 // a hex name line, or a stat line
)

// filesQuery is ?path=&mode=&recursive= with the request's size, parsed.
type filesQuery struct {
	raw        *string // ?path= as given
	normalised string  // path.Clean of an absolute raw path; "" otherwise
	modeRaw    *string
	mode       *int64
	// GET: the window of a regular file (?offset=&length=).
	offset, length *int64
	recursive      bool
	bytes          *int64 // PUT: Content-Length
}

// parseFilesQuery reads what a files request asks for. What is malformed
// for Go (a mode that is not octal, a recursive that is not a boolean, a
// PUT without Content-Length) is refused here, naming the field; whether
// the path and the mode are allowed is the policy's to say.
func parseFilesQuery(c echo.Context) (filesQuery, error) {
	var q filesQuery
	method := c.Request().Method
	qp := c.QueryParams()
	if qp.Has("path") {
		p := qp.Get("path")
		q.raw = &p
		if strings.HasPrefix(p, "/") {
			q.normalised = path.Clean(p)
		}
	}
	if qp.Has("mode") {
		m := qp.Get("mode")
		if method != http.MethodPut {
			return q, invalid("mode", "applies to PUT only")
		}
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || m == "" || len(m) > 6 {
			return q, invalid("mode", "must be octal permission bits such as 0644, got %q", clip.String(m, 16))
		}
		v := int64(n)
		q.modeRaw, q.mode = &m, &v
	}
	for name, dst := range map[string]**int64{"offset": &q.offset, "length": &q.length} {
		if !qp.Has(name) {
			continue
		}
		v := qp.Get(name)
		if method != http.MethodGet {
			return q, invalid(name, "applies to GET only")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return q, invalid(name, "must be an integer, got %q", clip.String(v, 32))
		}
		*dst = &n
	}
	if qp.Has("recursive") {
		r := qp.Get("recursive")
		if method != http.MethodDelete {
			return q, invalid("recursive", "applies to DELETE only")
		}
		b, err := strconv.ParseBool(r)
		if err != nil {
			return q, invalid("recursive", "must be true or false, got %q", clip.String(r, 16))
		}
		q.recursive = b
	}
	if method == http.MethodPut {
		n := c.Request().ContentLength
		if n < 0 {
			p := newProblem(http.StatusLengthRequired, wire.CodeLengthRequired, "a file PUT must state its size in Content-Length (chunked bodies are not accepted), so the policy can bound it before a byte is written")
			p.Field = "Content-Length"
			return q, p
		}
		q.bytes = &n
	}
	return q, nil
}

func (q filesQuery) policyQuery() policies.RequestQuery {
	return policies.RequestQuery{Path: q.raw, Mode: q.modeRaw, Offset: q.offset, Length: q.length}
}

func (q filesQuery) policyFile() *policies.FileRequest {
	return &policies.FileRequest{Path: q.normalised, Bytes: q.bytes, Mode: q.mode}
}

// filesLimits is the files routes' first middleware: it puts the
// policy's files.* limits on the answer before anything can refuse it, so
// that a refusal by authentication or the policy (401, 403 F1/F2, 404
// sandbox_not_found) carries them as a success does.
func (s *Server) filesLimits(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		st := s.cfg.Engine.Settings().Files
		h := c.Response().Header()
		h.Set(headerMaxWriteBytes, strconv.FormatInt(st.MaxWriteBytes, 10))
		h.Set(headerMaxReadBytes, strconv.FormatInt(st.MaxReadBytes, 10))
		h.Set(headerMaxListEntries, strconv.Itoa(st.MaxListEntries))
		h.Set(headerFilesTimeout, strconv.Itoa(st.TimeoutSeconds))
		return next(c)
	}
}

// fileOp prepares one files request: the record (running), the parsed
// query, the script's request and the deadline (filesLimits has set the
// limit headers).
func (s *Server) fileOp(c echo.Context, op fileops.Op) (store.Sandbox, fileops.Request, context.Context, context.CancelFunc, error) {
	st := s.cfg.Engine.Settings().Files
	rec, err := recordOf(c)
	if err != nil {
		return rec, fileops.Request{}, nil, nil, err
	}
	if rec.State != store.StateRunning || rec.AllocID == "" {
		return rec, fileops.Request{}, nil, nil, notRunning(rec.ID, rec.State)
	}
	q, err := parseFilesQuery(c)
	if err != nil {
		return rec, fileops.Request{}, nil, nil, err
	}
	// F1 refused anything else; the script cannot carry a NUL either way.
	if q.normalised == "" || strings.ContainsRune(q.normalised, 0) {
		return rec, fileops.Request{}, nil, nil, invalid("path", "must be an absolute path without NUL bytes")
	}
	req := fileops.Request{
		Op: op, Path: q.normalised, Mode: st.DefaultMode, MaxBytes: st.MaxReadBytes,
		MaxEntries: st.MaxListEntries, Recursive: q.recursive, Roots: st.Roots,
		// The script's own bound on a put, a little past the gateway's:
		// it matters only when the gateway went away mid-body.
		Timeout: time.Duration(st.TimeoutSeconds)*time.Second + killAfter,
	}
	if q.mode != nil {
		req.Mode = uint32(*q.mode & 0o7777777) //nolint:gosec // G115: parsed as 32-bit octal; F2 held it to allowed_mode_bits
	}
	if q.bytes != nil {
		req.Size = *q.bytes
	}
	if q.offset != nil { // F2 held both to [0, ...) and [1, files.max_read_bytes]
		req.Offset = max(*q.offset, 0)
	}
	if q.length != nil {
		req.Length = max(*q.length, 1)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), time.Duration(st.TimeoutSeconds)*time.Second)
	return rec, req, ctx, cancel, nil
}

// putFile is PUT /v1/sandboxes/{id}/files?path=&mode=: the raw body,
// streamed into the sandbox and renamed over the target once complete.
func (s *Server) putFile(c echo.Context) error {
	rec, req, ctx, cancel, err := s.fileOp(c, fileops.OpPut)
	if err != nil {
		return err
	}
	defer cancel()
	stdout, stderr := newCappedBuffer(filesStatLimit), newCappedBuffer(filesStderrLimit)
	code, err := s.cfg.Nomad.ExecReader(ctx, rec.AllocID, s.taskName, req.Args(), c.Request().Body, stdout, stderr)
	if err != nil {
		return s.filesFailed(c, ctx, rec, req, err)
	}
	if code != 0 {
		return filesRefused(req, code, stderr)
	}
	out, _, _ := stdout.result()
	st, err := fileops.ParseStat(strings.TrimSpace(out))
	if err != nil {
		return nomadUnavailable("the file was written but the sandbox's answer was not understood", err)
	}
	return c.JSON(http.StatusOK, infoOf(req.Path, "file", st))
}

// deleteFile is DELETE /v1/sandboxes/{id}/files?path=&recursive=.
func (s *Server) deleteFile(c echo.Context) error {
	rec, req, ctx, cancel, err := s.fileOp(c, fileops.OpDelete)
	if err != nil {
		return err
	}
	defer cancel()
	stderr := newCappedBuffer(filesStderrLimit)
	code, err := s.cfg.Nomad.Exec(ctx, rec.AllocID, s.taskName, req.Args(), nil, io.Discard, stderr)
	if err != nil {
		return s.filesFailed(c, ctx, rec, req, err)
	}
	if code != 0 {
		return filesRefused(req, code, stderr)
	}
	return c.NoContent(http.StatusNoContent)
}

// getFile is GET /v1/sandboxes/{id}/files?path=: a regular file's bytes,
// streamed as they come, or a directory's listing as JSON.
func (s *Server) getFile(c echo.Context) error {
	rec, req, ctx, cancel, err := s.fileOp(c, fileops.OpGet)
	if err != nil {
		return err
	}
	defer cancel()
	out := &getWriter{c: c, req: req}
	stderr := newCappedBuffer(filesStderrLimit)
	code, err := s.cfg.Nomad.Exec(ctx, rec.AllocID, s.taskName, req.Args(), nil, out, stderr)
	if out.committed {
		// The status and Content-Length are sent: a failure now can only
		// cut the body short, which the client sees as an unexpected EOF
		// (net/http closes a connection whose body is shorter than its
		// Content-Length).
		if err == nil && code == 0 && out.written == out.header.Length {
			return nil
		}
		s.log.Warn("file read cut short", "sandbox", rec.ID, "path", req.Path, "sent", out.written, "length", out.header.Length, "exit", code, "error", err)
		return nil
	}
	switch {
	case out.err != nil: // the writer stopped the stream on a malformed answer
		return nomadUnavailable("the sandbox's answer to a file read was not understood", out.err)
	case err != nil:
		return s.filesFailed(c, ctx, rec, req, err)
	case code != 0 && out.line.Len() == 0:
		return filesRefused(req, code, stderr)
	case !out.header.Dir:
		return nomadUnavailable("the sandbox ended the file read before sending it", fmt.Errorf("exit %d: %s", code, stderrText(stderr)))
	}
	entries, err := fileops.ParseListing(out.listing.Bytes(), out.header.Listed)
	if err != nil || code != 0 {
		return nomadUnavailable("the sandbox's directory listing was not understood", errors.Join(err, fmt.Errorf("exit %d: %s", code, stderrText(stderr))))
	}
	l := wire.Listing{Path: req.Path, Entries: make([]wire.FileInfo, 0, len(entries)), Total: out.header.Total, Truncated: out.header.Total > out.header.Listed}
	for _, e := range entries {
		fi := infoOf("", e.Type, e.Stat)
		fi.Name = e.Name
		l.Entries = append(l.Entries, fi)
	}
	return c.JSON(http.StatusOK, l)
}

// errGetAnswer stops a get whose answer is malformed or too long (the
// reason is in getWriter.err).
var errGetAnswer = errors.New("files: malformed answer")

// getWriter receives a get's stdout: the header line, then a file's bytes
// (sent on as they arrive, with the header's size as Content-Length) or a
// directory's listing (kept, bounded, for the JSON answer).
type getWriter struct {
	c         echo.Context
	req       fileops.Request
	line      bytes.Buffer
	header    fileops.Header
	gotHeader bool
	committed bool
	written   int64
	listing   bytes.Buffer
	err       error
}

func (w *getWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.gotHeader {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line.Write(p)
			if w.line.Len() > fileops.MaxHeaderLine {
				w.err = fmt.Errorf("header line longer than %d bytes", fileops.MaxHeaderLine)
				return 0, errGetAnswer
			}
			return n, nil
		}
		w.line.Write(p[:i])
		p = p[i+1:]
		w.gotHeader = true
		h, err := fileops.ParseHeader(w.line.String())
		if err != nil {
			w.err = err
			return 0, errGetAnswer
		}
		w.header = h
		if !h.Dir {
			if err := w.commit(); err != nil {
				return 0, err
			}
		}
	}
	if w.header.Dir {
		if w.listing.Len()+len(p) > 2*filesListingLineLimit*max(w.header.Listed, 1) {
			w.err = errors.New("listing longer than its entries allow")
			return 0, errGetAnswer
		}
		w.listing.Write(p)
		return n, nil
	}
	if room := w.header.Length - w.written; int64(len(p)) > room { // the file grew meanwhile
		p = p[:max(room, 0)]
	}
	m, err := w.c.Response().Write(p)
	w.written += int64(m)
	if err != nil {
		return 0, err // the caller went away: the stream ends
	}
	return n, nil
}

func (w *getWriter) commit() error {
	h := w.c.Response().Header()
	st := w.header.File
	h.Set(echo.HeaderContentType, echo.MIMEOctetStream)
	h.Set(echo.HeaderContentLength, strconv.FormatInt(w.header.Length, 10))
	h.Set(headerFileSize, strconv.FormatInt(st.Size, 10))
	h.Set(headerFileOffset, strconv.FormatInt(w.header.Offset, 10))
	h.Set(headerFileMode, fmt.Sprintf("%04o", st.Mode))
	h.Set(headerFileModified, st.ModTime.Format(time.RFC3339))
	h.Set(echo.HeaderLastModified, st.ModTime.Format(http.TimeFormat))
	w.c.Response().WriteHeader(http.StatusOK)
	w.committed = true
	return nil
}

func infoOf(p, typ string, st fileops.Stat) wire.FileInfo {
	return wire.FileInfo{Path: p, Type: typ, Size: st.Size, Mode: fmt.Sprintf("%04o", st.Mode), ModifiedAt: st.ModTime.Format(time.RFC3339)}
}

func stderrText(b *cappedBuffer) string {
	s, _, _ := b.result()
	return strings.TrimSpace(s)
}

// filesRefused maps the script's exit status to the problem it means. The
// script's message (stderr) names the path; it is the sandbox's own text,
// bounded.
func filesRefused(req fileops.Request, code int, stderr *cappedBuffer) error {
	msg := stderrText(stderr)
	if msg == "" {
		msg = req.Path
	}
	switch code {
	case fileops.ExitNotFound:
		return fileProblem(http.StatusNotFound, wire.CodeFileNotFound, msg)
	case fileops.ExitEscapes:
		return fileProblem(http.StatusForbidden, wire.CodePathEscapesRoots, msg+" (a symbolic link is followed only while it stays under files.roots "+strings.Join(req.Roots, ", ")+")")
	case fileops.ExitIsDirectory:
		return fileProblem(http.StatusConflict, wire.CodeIsDirectory, msg)
	case fileops.ExitNotDir:
		return fileProblem(http.StatusConflict, wire.CodeNotDirectory, msg)
	case fileops.ExitNotEmpty:
		return fileProblem(http.StatusConflict, wire.CodeDirectoryNotEmpty, msg)
	case fileops.ExitNotRegular:
		return fileProblem(http.StatusUnprocessableEntity, wire.CodeNotRegularFile, msg)
	case fileops.ExitTooLarge:
		return fileProblem(http.StatusUnprocessableEntity, wire.CodeFileTooLarge, msg+" (files.max_read_bytes; read it in windows with ?offset=&length=)")
	case fileops.ExitShort:
		return fileProblem(http.StatusBadRequest, wire.CodeIncompleteBody, msg)
	case fileops.ExitWriteFailed:
		return fileProblem(http.StatusConflict, wire.CodeWriteFailed, msg)
	case 126, 127:
		return fileProblem(http.StatusUnprocessableEntity, wire.CodeImageLacksTools, "the image lacks a tool the file operations need (sh, cat, mkdir, mv, chmod, rm, rmdir, stat, readlink -f, wc, od, tr; busybox or coreutils have them): "+msg)
	}
	return nomadUnavailable(fmt.Sprintf("the file operation failed in the sandbox with exit %d: %s", code, msg), nil)
}

func fileProblem(status int, code, detail string) *Problem {
	p := newProblem(status, code, detail)
	p.Field = "path"
	return p
}

// filesFailed is a files exec that did not run to its exit code.
func (s *Server) filesFailed(c echo.Context, ctx context.Context, rec store.Sandbox, req fileops.Request, err error) error {
	switch {
	case c.Request().Context().Err() != nil:
		return err // the caller went away; nobody reads an answer
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return newProblem(http.StatusGatewayTimeout, wire.CodeFilesTimeout, fmt.Sprintf("the file %s of %s did not finish within files.timeout_seconds (%d s); a write that did not finish wrote nothing", req.Op, req.Path, s.cfg.Engine.Settings().Files.TimeoutSeconds))
	case errors.Is(err, nomad.ErrCommandNotStarted):
		return fileProblem(http.StatusUnprocessableEntity, wire.CodeImageLacksTools, "Nomad could not start the file operation's shell (/bin/sh): "+err.Error())
	}
	return s.streamFailed(c.Request().Context(), rec, "the file "+string(req.Op), err)
}
