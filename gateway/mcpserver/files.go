package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bounds of read_file: what one tool result carries of a file, so
// that it stays well inside MaxResultBytes once base64 or JSON escaping
// has grown it, and inside what a model's context should take at once.
const (
	// DefaultReadBytes is read_file's max_bytes when the caller gives none
	// (as exec's default output cap).
	DefaultReadBytes = 64 << 10
	// MaxReadBytes is the most max_bytes may ask for; the policy's
	// files.max_read_bytes (the X-Sandgate-Max-Read-Bytes header) may be
	// lower, and then bounds it instead.
	MaxReadBytes = 512 << 10
)

// Encodings of read_file's content and write_file's.
const (
	encodingUTF8   = "utf-8"
	encodingBase64 = "base64"
)

// ReadFileArgs are read_file's arguments.
type ReadFileArgs struct {
	ID       string `json:"id" jsonschema:"the sandbox id"`
	Path     string `json:"path" jsonschema:"absolute path of a regular file under /workspace or /tmp (the policy's files.roots)"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"skip this many bytes first (default 0); a result that was cut names the next offset"`
	MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"return at most this many bytes (default 65536, at most 524288 or the policy's files.max_read_bytes if lower)"`
}

// WriteFileArgs are write_file's arguments.
type WriteFileArgs struct {
	ID       string `json:"id" jsonschema:"the sandbox id"`
	Path     string `json:"path" jsonschema:"absolute path under /workspace or /tmp (the policy's files.roots), not a root itself; missing parent directories are created"`
	Content  string `json:"content" jsonschema:"the file's whole content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8 (default: content is the text) or base64 (content is standard base64 of the bytes)"`
	Mode     string `json:"mode,omitempty" jsonschema:"octal permission bits such as 0644 (default) or 0755, within 0777"`
}

// ListFilesArgs are list_files' arguments.
type ListFilesArgs struct {
	ID   string `json:"id" jsonschema:"the sandbox id"`
	Path string `json:"path" jsonschema:"absolute path of a directory: /workspace, /tmp or one under them"`
}

// ReadFileResult is read_file's result.
type ReadFileResult struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	ModifiedAt string `json:"modified_at"`
	// Encoding is utf-8 when the bytes returned are valid UTF-8 text
	// without control characters other than tab, newline and carriage
	// return; base64 otherwise.
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
	// Offset and ReturnedBytes say which bytes Content holds.
	Offset        int64 `json:"offset"`
	ReturnedBytes int64 `json:"returned_bytes"`
	// Truncated: the file goes on after them; NextOffset reads on.
	Truncated  bool   `json:"truncated"`
	NextOffset *int64 `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
}

func (t tools) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadFileArgs) (*mcp.CallToolResult, any, error) {
	switch {
	case in.Offset < 0:
		return toolProblem(http.StatusBadRequest, "invalid_request", "offset", "offset must not be negative"), nil, nil
	case in.MaxBytes < 0:
		return toolProblem(http.StatusBadRequest, "invalid_request", "max_bytes", "max_bytes must not be negative"), nil, nil
	}
	want := in.MaxBytes
	if want == 0 {
		want = DefaultReadBytes
	}
	// The sandbox sends only the window asked for (?offset=&length=). A
	// policy whose files.max_read_bytes is below what one result carries
	// refuses the length (F2); its limit is in the answer's headers, and
	// the window is asked again within it.
	limit := min(want, int64(MaxReadBytes))
	w, err := t.readWindow(ctx, req, in, limit)
	if err != nil {
		return nil, nil, err
	}
	if policy, perr := strconv.ParseInt(w.header.Get("X-Sandgate-Max-Read-Bytes"), 10, 64); w.status == http.StatusForbidden && perr == nil && policy > 0 && policy < limit {
		limit = policy
		if w, err = t.readWindow(ctx, req, in, limit); err != nil {
			return nil, nil, err
		}
	}
	w.capped = limit < want
	switch {
	case w.status != http.StatusOK:
		return result(&w.other), nil, nil
	case w.mismatch:
		return toolProblem(http.StatusConflict, "is_a_directory", "path", in.Path+" is a directory: list_files lists it"), nil, nil
	}
	got := w.body.Bytes()
	out := ReadFileResult{
		Path: in.Path, Size: w.size, Mode: w.header.Get("X-Sandgate-File-Mode"), ModifiedAt: w.header.Get("X-Sandgate-File-Modified"),
		Offset: in.Offset,
	}
	end := min(in.Offset, w.size) + int64(len(got))
	if end < w.size {
		// A cut inside a character would make the text look binary.
		if cut := textCut(got); cut > 0 {
			got = got[:cut]
			end = min(in.Offset, w.size) + int64(cut)
		}
	}
	out.ReturnedBytes = int64(len(got))
	if isText(got) {
		out.Encoding, out.Content = encodingUTF8, string(got)
	} else {
		out.Encoding, out.Content = encodingBase64, base64.StdEncoding.EncodeToString(got)
	}
	var notes []string
	if w.capped {
		notes = append(notes, fmt.Sprintf("max_bytes was lowered to %d, the most one read_file result carries", w.limit))
	}
	switch {
	case in.Offset > w.size:
		notes = append(notes, fmt.Sprintf("offset %d is past the end of the file (%d bytes)", in.Offset, w.size))
	case end < w.size:
		out.Truncated, out.NextOffset = true, &end
		notes = append(notes, fmt.Sprintf("the file is %d bytes; this result holds bytes %d to %d. Call read_file again with offset %d for more, "+
			"or work on a large file in the sandbox with exec (grep, head, tail, split)",
			w.size, in.Offset, end, end))
	}
	for i, n := range notes {
		if i > 0 {
			out.Note += "; "
		}
		out.Note += n
	}
	return jsonResult(out, false), nil, nil
}

// readWindow asks the files route for limit bytes of in.Path from
// in.Offset.
func (t tools) readWindow(ctx context.Context, req *mcp.CallToolRequest, in ReadFileArgs, limit int64) (*fileAnswer, error) {
	w := newFileAnswer(true, limit)
	q := url.Values{"offset": {strconv.FormatInt(in.Offset, 10)}, "length": {strconv.FormatInt(limit, 10)}}
	return w, t.serve(ctx, req, http.MethodGet, filesPath(in.ID, in.Path, q), nil, "", w)
}

func (t tools) writeFile(ctx context.Context, req *mcp.CallToolRequest, in WriteFileArgs) (*mcp.CallToolResult, any, error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case "", encodingUTF8:
	case encodingBase64:
		b, err := base64.StdEncoding.DecodeString(in.Content)
		if err != nil {
			return toolProblem(http.StatusBadRequest, "invalid_request", "content", "content is not standard base64: "+err.Error()), nil, nil
		}
		data = b
	default:
		return toolProblem(http.StatusBadRequest, "invalid_request", "encoding", fmt.Sprintf("encoding must be utf-8 or base64, not %q", in.Encoding)), nil, nil
	}
	q := url.Values{}
	if in.Mode != "" {
		q.Set("mode", in.Mode)
	}
	w := newBuffer(MaxResultBytes)
	if err := t.serve(ctx, req, http.MethodPut, filesPath(in.ID, in.Path, q), data, "application/octet-stream", w); err != nil {
		return nil, nil, err
	}
	return result(w), nil, nil
}

func (t tools) listFiles(ctx context.Context, req *mcp.CallToolRequest, in ListFilesArgs) (*mcp.CallToolResult, any, error) {
	w := newFileAnswer(false, 0)
	if err := t.serve(ctx, req, http.MethodGet, filesPath(in.ID, in.Path, nil), nil, "", w); err != nil {
		return nil, nil, err
	}
	if w.status == http.StatusOK && w.mismatch {
		return toolProblem(http.StatusConflict, "not_a_directory", "path",
			fmt.Sprintf("%s is a regular file of %d bytes: read_file reads it", in.Path, w.size)), nil, nil
	}
	return result(&w.other), nil, nil
}

// filesPath is /v1/sandboxes/{id}/files?path=... with q's other values.
func filesPath(id, p string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("path", p)
	return sandboxPath(id, "/files") + "?" + q.Encode()
}

// textCut is where a cut through b should fall so that it does not split
// a UTF-8 character at its end: len(b) less an incomplete last character,
// or 0 when b does not end inside one.
func textCut(b []byte) int {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if !utf8.RuneStart(c) {
			continue
		}
		if !utf8.FullRune(b[len(b)-i:]) {
			return len(b) - i
		}
		return 0
	}
	return 0
}

// isText: valid UTF-8 without control characters but tab, newline and
// carriage return, which would come back as escapes many times their size.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// toolProblem is an error result holding a problem document the tool
// wrote itself (an argument the REST route would not see, or an answer
// of the wrong kind), shaped like the gateway's.
func toolProblem(status int, code, field, detail string) *mcp.CallToolResult {
	return jsonResult(map[string]any{"status": status, "code": code, "field": field, "detail": detail}, true)
}

// jsonResult is a result holding v as its text and structured content.
func jsonResult(v any, isError bool) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"code":"internal_error"}`)
	}
	res := &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
	var obj map[string]any
	if json.Unmarshal(b, &obj) == nil {
		res.StructuredContent = obj
	}
	return res
}

// errStop ends a file transfer the tool has read enough of.
var errStop = errors.New("mcpserver: enough of the answer was read")

// fileAnswer is the http.ResponseWriter of a files GET. A 200 of the kind
// the tool reads (a file's window for read_file, a listing for list_files)
// is kept, of a file at most limit bytes; once they are in, or when the
// 200 is of the other kind (mismatch), Write fails, which ends the
// transfer in the sandbox. Any other answer goes to other, as call keeps
// it.
type fileAnswer struct {
	header   http.Header
	status   int
	wantFile bool
	// limit is the window read_file asked for; capped says it is below
	// the caller's max_bytes (MaxReadBytes or the policy's
	// files.max_read_bytes bounded it).
	limit    int64
	capped   bool
	size     int64 // the file's whole size (X-Sandgate-File-Size)
	mismatch bool
	body     bytes.Buffer
	other    buffer
}

func newFileAnswer(wantFile bool, limit int64) *fileAnswer {
	h := http.Header{}
	return &fileAnswer{header: h, wantFile: wantFile, limit: limit, other: buffer{header: h, max: MaxResultBytes}}
}

// Header is the answer's header map.
func (w *fileAnswer) Header() http.Header { return w.header }

// WriteHeader keeps the first status and decides what is kept.
func (w *fileAnswer) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	w.other.WriteHeader(status)
	if status != http.StatusOK {
		return
	}
	mt, _, _ := mime.ParseMediaType(w.header.Get("Content-Type"))
	isFile := mt != "application/json"
	w.mismatch = isFile != w.wantFile
	w.size, _ = strconv.ParseInt(w.header.Get("X-Sandgate-File-Size"), 10, 64)
}

// Write keeps what the tool reads and stops the rest.
func (w *fileAnswer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case w.status != http.StatusOK || !w.wantFile && !w.mismatch:
		return w.other.Write(p)
	case w.mismatch:
		return 0, errStop
	}
	n := len(p)
	room := w.limit - int64(w.body.Len())
	w.body.Write(p[:min(room, int64(len(p)))])
	if int64(w.body.Len()) >= w.limit && room < int64(n) {
		return n, errStop // more than the window: the rest is not sent
	}
	return n, nil
}
