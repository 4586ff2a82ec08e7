package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"sandgate/gateway/wire"
)

// Entry types of a FileInfo.
const (
	FileTypeFile    = wire.FileTypeFile
	FileTypeDir     = wire.FileTypeDir
	FileTypeSymlink = wire.FileTypeSymlink
	FileTypeOther   = wire.FileTypeOther // a FIFO, socket or device
)

// ErrIsDirectory is wrapped by ReadFile when the path is a directory (the
// gateway answered its listing instead of bytes; ListFiles reads it).
var ErrIsDirectory = errors.New("client: the path is a directory")

// ErrNotDirectory is wrapped by ListFiles when the path is a regular file
// (the gateway began to send its bytes; ReadFile reads them).
var ErrNotDirectory = errors.New("client: the path is not a directory")

// FileLimits are the policy's files.* limits, as every files answer
// carries them in its X-Sandgate-* headers. A zero field was absent.
type FileLimits struct {
	// MaxWriteBytes is files.max_write_bytes: the largest file a write
	// takes (a larger size is refused by rule F2 before a byte is sent).
	MaxWriteBytes int64
	// MaxReadBytes is files.max_read_bytes: the largest file a read
	// returns (a larger one is 422 file_too_large).
	MaxReadBytes int64
	// MaxListEntries is files.max_list_entries: the most entries a
	// listing holds (Listing.Truncated says when it held more).
	MaxListEntries int
	// TimeoutSeconds is files.timeout_seconds: how long one file
	// operation may take (504 files_timeout after it).
	TimeoutSeconds int
}

// limitsOf reads the limit headers of a files answer.
func limitsOf(h http.Header) FileLimits {
	n := func(name string) int64 {
		v, _ := strconv.ParseInt(h.Get(name), 10, 64)
		return max(v, 0)
	}
	return FileLimits{
		MaxWriteBytes: n("X-Sandgate-Max-Write-Bytes"), MaxReadBytes: n("X-Sandgate-Max-Read-Bytes"),
		MaxListEntries: int(n("X-Sandgate-Max-List-Entries")), TimeoutSeconds: int(n("X-Sandgate-Files-Timeout-Seconds")),
	}
}

// FileInfo is a file as the files API reports it: WriteFile's answer,
// ReadFile's headers. The JSON object is wire.FileInfo (Perm reads its
// mode); Limits is the client's own, read from the answer's headers, so it
// lives here and not on the wire type. Path is the file's path as the
// gateway normalised it (WriteFile), as it was asked for (ReadFile).
type FileInfo struct {
	wire.FileInfo
	// Limits are the answer's files.* limits.
	Limits FileLimits `json:"-"`
}

// Listing is a directory as ListFiles reads it. The JSON object is
// wire.Listing (its entries are wire.FileInfo, each with Name and no
// Path); Limits is the client's own, read from the answer's headers.
type Listing struct {
	wire.Listing
	// Limits are the answer's files.* limits (Listing.Entries holds at
	// most Limits.MaxListEntries).
	Limits FileLimits `json:"-"`
}

// WriteOptions are the optional parts of a WriteFile.
type WriteOptions struct {
	// Mode is the written file's permission bits (within 0777, rule F2);
	// nil takes the policy's files.default_mode (0644).
	Mode *fs.FileMode
}

// filesRequest is a request to /v1/sandboxes/{id}/files?path=.
func filesRequest(method, id, path string) (request, error) {
	seg, err := segment("sandbox id", id)
	if err != nil {
		return request{}, err
	}
	if path == "" {
		return request{}, fmt.Errorf("%w: an empty file path", ErrInvalidArgument)
	}
	return request{method: method, path: "/v1/sandboxes/" + seg + "/files", query: url.Values{"path": {path}}}, nil
}

// WriteFile is PUT /v1/sandboxes/{id}/files?path=: it streams exactly
// size bytes of r into the file at path (absolute, under the policy's
// files.roots: /workspace and /tmp by default), creating its parent
// directories. The write is atomic: the sandbox sees the old file or the
// new one, and a transfer that breaks off leaves the old one. size is sent
// as Content-Length, so a size beyond files.max_write_bytes is refused (F2)
// before r is read; r yielding fewer or more bytes than size is a
// *TransportError and nothing is written. WriteFile does not close r. A
// path outside the roots is a
// *Problem with rule F1; one that is a directory is CodeIsDirectory.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, size int64, opts WriteOptions) (FileInfo, error) {
	req, err := filesRequest(http.MethodPut, id, path)
	if err != nil {
		return FileInfo{}, err
	}
	if size < 0 {
		return FileInfo{}, fmt.Errorf("%w: size %d is negative", ErrInvalidArgument, size)
	}
	if opts.Mode != nil {
		if *opts.Mode&^fs.ModePerm != 0 {
			return FileInfo{}, fmt.Errorf("%w: mode %v holds more than permission bits", ErrInvalidArgument, *opts.Mode)
		}
		req.query.Set("mode", fmt.Sprintf("%04o", uint32(*opts.Mode)))
	}
	if r == nil || size == 0 {
		r = http.NoBody
	}
	// net/http closes a body that is an io.Closer: r stays the caller's.
	req.raw, req.rawSize = struct{ io.Reader }{r}, size
	resp, target, err := c.send(ctx, req)
	if err != nil {
		return FileInfo{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out FileInfo
	req.out = &out
	if err := decodeJSON(resp, target, req); err != nil {
		return FileInfo{}, err
	}
	out.Limits = limitsOf(resp.Header)
	return out, nil
}

// ReadFile is GET /v1/sandboxes/{id}/files?path= of a regular file: its
// bytes, streamed as they arrive (close the reader when done), and its
// size, mode and modification time from the answer's headers. A file
// larger than files.max_read_bytes is a *Problem with CodeFileTooLarge; a
// directory is an error wrapping ErrIsDirectory. The reader's Read
// returns io.ErrUnexpectedEOF when the transfer broke off before Size
// bytes.
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, FileInfo, error) {
	return c.ReadFileWindow(ctx, id, path, 0, 0)
}

// ReadFileWindow is ReadFile of at most length bytes from offset (length
// 0: to the end), so a file larger than files.max_read_bytes is read in
// parts (a length beyond that bound is refused, F2). FileInfo.Size is the
// whole file's; the reader yields the window, ending early when the file
// does.
func (c *Client) ReadFileWindow(ctx context.Context, id, path string, offset, length int64) (io.ReadCloser, FileInfo, error) {
	req, err := filesRequest(http.MethodGet, id, path)
	if err != nil {
		return nil, FileInfo{}, err
	}
	if offset < 0 || length < 0 {
		return nil, FileInfo{}, fmt.Errorf("%w: a negative offset or length", ErrInvalidArgument)
	}
	if offset > 0 {
		req.query.Set("offset", strconv.FormatInt(offset, 10))
	}
	if length > 0 {
		req.query.Set("length", strconv.FormatInt(length, 10))
	}
	req.header = http.Header{"Accept": {"application/octet-stream, application/problem+json"}}
	resp, target, err := c.send(ctx, req)
	if err != nil {
		return nil, FileInfo{}, err
	}
	if isJSON(resp) {
		_ = resp.Body.Close()
		return nil, FileInfo{}, fmt.Errorf("%w: GET %s answered a listing (ListFiles reads it)", ErrIsDirectory, target)
	}
	size := resp.ContentLength
	if whole, err := strconv.ParseInt(resp.Header.Get("X-Sandgate-File-Size"), 10, 64); err == nil {
		size = whole
	}
	info := FileInfo{
		FileInfo: wire.FileInfo{
			Path: path, Type: FileTypeFile, Size: size,
			Mode: resp.Header.Get("X-Sandgate-File-Mode"), ModifiedAt: resp.Header.Get("X-Sandgate-File-Modified"),
		},
		Limits: limitsOf(resp.Header),
	}
	return resp.Body, info, nil
}

// ListFiles is GET /v1/sandboxes/{id}/files?path= of a directory: at most
// files.max_list_entries entries (Truncated and Total say how many there
// are). A regular file is an error wrapping ErrNotDirectory, returned as
// soon as the answer's headers say so: its bytes are not read.
func (c *Client) ListFiles(ctx context.Context, id, path string) (Listing, error) {
	req, err := filesRequest(http.MethodGet, id, path)
	if err != nil {
		return Listing{}, err
	}
	resp, target, err := c.send(ctx, req)
	if err != nil {
		return Listing{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if !isJSON(resp) {
		return Listing{}, fmt.Errorf("%w: %s is a file of %d bytes (ReadFile reads it)", ErrNotDirectory, path, resp.ContentLength)
	}
	var out Listing
	req.out = &out
	if err := decodeJSON(resp, target, req); err != nil {
		return Listing{}, err
	}
	out.Limits = limitsOf(resp.Header)
	return out, nil
}

// DeleteFile is DELETE /v1/sandboxes/{id}/files?path=: it removes a file,
// a symbolic link (never its target) or an empty directory; recursive
// removes a directory and everything it holds. A missing path is a
// *Problem with CodeFileNotFound, a non-empty directory without recursive
// CodeDirectoryNotEmpty; a root (/workspace, /tmp) is refused by rule F1.
func (c *Client) DeleteFile(ctx context.Context, id, path string, recursive bool) error {
	req, err := filesRequest(http.MethodDelete, id, path)
	if err != nil {
		return err
	}
	if recursive {
		req.query.Set("recursive", "true")
	}
	return c.do(ctx, req)
}

func isJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json"
}
