// Package mcpserver serves sandgate's sandbox tools over the Model Context
// Protocol (streamable HTTP, the official Go SDK) at /mcp of the gateway.
//
// It authenticates with the same bearer token as the REST API and decides
// nothing itself: every tool call is one request to the gateway's own REST
// handler with the caller's token, so the token check, the policy decision
// (its denials carry the rule ids), the decision log, the budgets and every
// refusal are exactly the REST route's. A tool's result is the route's JSON
// answer; a refusal is an error result holding the problem document. The
// file tools shape the files route's answer: read_file returns a bounded
// window of a file's bytes as text or base64 (and ends the transfer in the
// sandbox once it has them), list_files the listing, write_file the
// written file's information.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxResultBytes bounds the text of one tool result. The REST answers it
// carries are bounded already (an exec's two streams by the bundle's
// exec.max_output_bytes, a log tail by exec.max_logs_tail_bytes); a result
// cut here says so.
const MaxResultBytes = 1 << 20

// Config is what the MCP endpoint needs from the gateway.
type Config struct {
	// API returns the gateway's REST handler (called per tool call: the
	// handler is built after this endpoint).
	API func() http.Handler
	// Verify checks a bearer token's signature and expiry and says who it
	// is and which routes it may call. The gateway has refused, before
	// this endpoint, any Authorization header that is not "Bearer", one
	// space and a token, and any token it no longer holds as active; what
	// the token may do is decided per tool call by the REST route.
	Verify func(ctx context.Context, raw string) (Caller, error)
	// Version is the gateway's version, reported to clients.
	Version string
}

// Caller is a verified token as /mcp sees it.
type Caller struct {
	// Principal is "<role>:<sub>".
	Principal string
	// Expires is the token's expiry.
	Expires time.Time
	// MayCall reports whether the route table of the policy in force lets
	// this token call method on route (an Echo route template such as
	// /v1/sandboxes/:id): tools/list offers a tool only when it does, so a
	// session token is not offered create_sandbox, which T2 refuses it.
	// The policy still decides every call. Nil offers no tool.
	MayCall func(method, route string) bool
}

// Handler returns the /mcp endpoint: bearer authentication, then the MCP
// streamable HTTP transport (stateless, JSON answers) and the tools the
// caller's token may use (Caller.MayCall). One MCP server is built per
// distinct set of tools and kept.
func Handler(cfg Config) http.Handler {
	t := tools{cfg: cfg}
	var servers sync.Map // uint64 mask of defs -> *mcp.Server
	serverFor := func(r *http.Request) *mcp.Server {
		var mask uint64
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			if may, _ := ti.Extra[mayCallKey].(func(string, string) bool); may != nil {
				for i, spec := range toolSpecs {
					if may(spec.Method, spec.Route) {
						mask |= 1 << i
					}
				}
			}
		}
		if srv, ok := servers.Load(mask); ok {
			return srv.(*mcp.Server)
		}
		// The tools capability always: a token offered no tool (a
		// reviewer's) lists none, rather than being told there are no
		// tools to list. A stateless server never changes its list.
		srv := mcp.NewServer(&mcp.Implementation{Name: "sandgate", Version: cfg.Version}, &mcp.ServerOptions{
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		})
		for i, spec := range toolSpecs {
			if mask&(1<<i) != 0 {
				spec.add(srv, &mcp.Tool{Name: spec.Name, Description: spec.Description}, t)
			}
		}
		got, _ := servers.LoadOrStore(mask, srv)
		return got.(*mcp.Server)
	}
	h := mcp.NewStreamableHTTPHandler(serverFor, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return auth.RequireBearerToken(func(ctx context.Context, raw string, _ *http.Request) (*auth.TokenInfo, error) {
		c, err := cfg.Verify(ctx, raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: c.Principal, Expiration: c.Expires, Extra: map[string]any{rawTokenKey: raw, mayCallKey: c.MayCall}}, nil
	}, nil)(h)
}

// mayCallKey holds the caller's Caller.MayCall in its TokenInfo.
const mayCallKey = "sandgate.may_call"

// Tool describes one tool the endpoint registers: its name and
// description as tools/list gives them, and the REST route each call of it
// makes (so who may call it is who may call that route: the bundle's route
// table, T2).
type Tool struct {
	Name        string
	Description string
	Method      string // the REST route's method
	Route       string // the REST route's template, e.g. /v1/sandboxes/:id/exec
	// InputSchema is the tool's inputSchema as tools/list gives it (set by
	// Tools).
	InputSchema json.RawMessage
}

// toolSpec is a Tool with the registration of its handler.
type toolSpec struct {
	Tool
	add func(srv *mcp.Server, tool *mcp.Tool, t tools)
}

// handler registers a tools method as a tool's handler.
func handler[In any](m func(tools, context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, any, error)) func(*mcp.Server, *mcp.Tool, tools) {
	return func(srv *mcp.Server, tool *mcp.Tool, t tools) {
		mcp.AddTool(srv, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			return m(t, ctx, req, in)
		})
	}
}

// toolSpecs are the tools Handler registers, in order: the one list both
// the endpoint and Tools (hence /openapi.json) read.
var toolSpecs = []toolSpec{
	{Tool{"create_sandbox", "Create a disposable Linux sandbox (POST /v1/sandboxes). " +
		"Returns the sandbox record with its id and a session token for that one sandbox, shown once.",
		http.MethodPost, "/v1/sandboxes", nil}, handler(tools.createSandbox)},
	{Tool{"sandbox_status", "Read a sandbox's record: state, expiry, node, profile (GET /v1/sandboxes/{id}).",
		http.MethodGet, "/v1/sandboxes/:id", nil}, handler(tools.status)},
	{Tool{"exec", "Run a command in a sandbox as an argument vector, no shell unless argv names one " +
		"(POST /v1/sandboxes/{id}/exec). A non-zero exit, a timeout and truncated output are data in the result, not errors.",
		http.MethodPost, "/v1/sandboxes/:id/exec", nil}, handler(tools.exec)},
	{Tool{"logs", "Read a bounded tail of the sandbox's main task output (GET /v1/sandboxes/{id}/logs).",
		http.MethodGet, "/v1/sandboxes/:id/logs", nil}, handler(tools.logs)},
	{Tool{"read_file", "Read a regular file in a sandbox (GET /v1/sandboxes/{id}/files). " +
		"Returns its size, mode and a window of its bytes: at most max_bytes (default 64 KiB, at most 512 KiB) from offset, as utf-8 text or base64. " +
		"truncated and next_offset say when the file goes on: call again from next_offset to read a file of any size in windows.",
		http.MethodGet, "/v1/sandboxes/:id/files", nil}, handler(tools.readFile)},
	{Tool{"write_file", "Write a whole file in a sandbox, atomically, creating its parent directories (PUT /v1/sandboxes/{id}/files). " +
		"Paths are absolute under /workspace or /tmp. content is utf-8 text, or base64 with encoding base64; the MCP request carries at most 1 MiB, so a larger file goes over the REST route. " +
		"Returns the written file's size, mode and modification time.",
		http.MethodPut, "/v1/sandboxes/:id/files", nil}, handler(tools.writeFile)},
	{Tool{"list_files", "List a directory in a sandbox (GET /v1/sandboxes/{id}/files): " +
		"entries with name, type (file, dir, symlink, other), size, mode and modified_at; truncated and total say when it holds more than the policy's files.max_list_entries.",
		http.MethodGet, "/v1/sandboxes/:id/files", nil}, handler(tools.listFiles)},
	{Tool{"destroy_sandbox", "Destroy a sandbox and revoke its session token (DELETE /v1/sandboxes/{id}).",
		http.MethodDelete, "/v1/sandboxes/:id", nil}, handler(tools.destroy)},
}

// Tools lists the tools Handler registers, in its order, each with the
// input schema tools/list gives it.
func Tools() ([]Tool, error) {
	schemas, err := inputSchemas()
	if err != nil {
		return nil, err
	}
	out := make([]Tool, len(toolSpecs))
	for i, s := range toolSpecs {
		out[i] = s.Tool
		out[i].InputSchema = schemas[s.Name]
	}
	return out, nil
}

// inputSchemas are the tools' input schemas as the SDK derives them from
// their argument types: a server with the tools registered, asked
// tools/list over an in-memory session (once; the handlers never run).
var inputSchemas = sync.OnceValues(func() (map[string]json.RawMessage, error) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "sandgate"}, nil)
	for _, spec := range toolSpecs {
		spec.add(srv, &mcp.Tool{Name: spec.Name, Description: spec.Description}, tools{})
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: list tools: %w", err)
	}
	defer func() { _ = ss.Close() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sandgate-apidoc"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: list tools: %w", err)
	}
	defer func() { _ = cs.Close() }()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: list tools: %w", err)
	}
	out := make(map[string]json.RawMessage, len(list.Tools))
	for _, tl := range list.Tools {
		if out[tl.Name], err = json.Marshal(tl.InputSchema); err != nil {
			return nil, fmt.Errorf("mcpserver: tool %s: %w", tl.Name, err)
		}
	}
	return out, nil
})

// rawTokenKey holds the caller's token in its TokenInfo, for the REST
// request each tool call makes.
const rawTokenKey = "sandgate.token"

// CreateArgs are create_sandbox's arguments, the fields of POST
// /v1/sandboxes; every one is optional (the bundle's defaults apply).
type CreateArgs struct {
	Profile    string            `json:"profile,omitempty" jsonschema:"strict (default) or workspace"`
	Network    string            `json:"network,omitempty" jsonschema:"none (default) or egress"`
	Image      string            `json:"image,omitempty" jsonschema:"an image of the gateway's allowlist (GET /v1/capabilities lists them)"`
	TTLSeconds int64             `json:"ttl_seconds,omitempty" jsonschema:"lifetime in seconds (default 3600)"`
	Labels     map[string]string `json:"labels,omitempty" jsonschema:"labels to find the sandbox by"`
}

// SandboxArgs name one sandbox.
type SandboxArgs struct {
	ID string `json:"id" jsonschema:"the sandbox id"`
}

// ExecArgs are exec's arguments, the fields of POST /v1/sandboxes/{id}/exec.
type ExecArgs struct {
	ID             string            `json:"id" jsonschema:"the sandbox id"`
	Argv           []string          `json:"argv" jsonschema:"the argument vector; argv[0] is the program"`
	Stdin          *string           `json:"stdin,omitempty" jsonschema:"text written to the command, then closed"`
	StdinBase64    *string           `json:"stdin_base64,omitempty" jsonschema:"stdin as standard base64, for bytes that are not UTF-8"`
	TimeoutSeconds int64             `json:"timeout_seconds,omitempty" jsonschema:"default 60, at most the bundle's exec.max_timeout_seconds"`
	Workdir        string            `json:"workdir,omitempty" jsonschema:"working directory: /workspace, /tmp or a directory under them (the policy's exec.workdir_roots), absolute and normalised (no .. or trailing /)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment entries for this command only"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty" jsonschema:"cap on each of stdout and stderr, at most the bundle's exec.max_output_bytes"`
}

// LogsArgs are logs' arguments.
type LogsArgs struct {
	ID        string `json:"id" jsonschema:"the sandbox id"`
	Stream    string `json:"stream,omitempty" jsonschema:"stdout (default) or stderr"`
	TailBytes int64  `json:"tail_bytes,omitempty" jsonschema:"how many bytes of the end (default and at most exec.max_logs_tail_bytes)"`
}

type tools struct{ cfg Config }

func (t tools) createSandbox(ctx context.Context, req *mcp.CallToolRequest, in CreateArgs) (*mcp.CallToolResult, any, error) {
	body := map[string]any{}
	for k, v := range map[string]string{"profile": in.Profile, "network": in.Network, "image": in.Image} {
		if v != "" {
			body[k] = v
		}
	}
	if in.TTLSeconds != 0 {
		body["ttl_seconds"] = in.TTLSeconds
	}
	if len(in.Labels) > 0 {
		body["labels"] = in.Labels
	}
	return t.call(ctx, req, http.MethodPost, "/v1/sandboxes", body)
}

func (t tools) status(ctx context.Context, req *mcp.CallToolRequest, in SandboxArgs) (*mcp.CallToolResult, any, error) {
	return t.call(ctx, req, http.MethodGet, sandboxPath(in.ID, ""), nil)
}

func (t tools) exec(ctx context.Context, req *mcp.CallToolRequest, in ExecArgs) (*mcp.CallToolResult, any, error) {
	body := map[string]any{"argv": in.Argv}
	if in.Argv == nil {
		body["argv"] = []string{}
	}
	if in.Stdin != nil {
		body["stdin"] = *in.Stdin
	}
	if in.StdinBase64 != nil {
		body["stdin_base64"] = *in.StdinBase64
	}
	if in.TimeoutSeconds != 0 {
		body["timeout_seconds"] = in.TimeoutSeconds
	}
	if in.Workdir != "" {
		body["workdir"] = in.Workdir
	}
	if in.Env != nil {
		body["env"] = in.Env
	}
	if in.MaxOutputBytes != 0 {
		body["max_output_bytes"] = in.MaxOutputBytes
	}
	return t.call(ctx, req, http.MethodPost, sandboxPath(in.ID, "/exec"), body)
}

func (t tools) logs(ctx context.Context, req *mcp.CallToolRequest, in LogsArgs) (*mcp.CallToolResult, any, error) {
	q := url.Values{}
	if in.Stream != "" {
		q.Set("stream", in.Stream)
	}
	if in.TailBytes != 0 {
		q.Set("tail_bytes", strconv.FormatInt(in.TailBytes, 10))
	}
	p := sandboxPath(in.ID, "/logs")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return t.call(ctx, req, http.MethodGet, p, nil)
}

func (t tools) destroy(ctx context.Context, req *mcp.CallToolRequest, in SandboxArgs) (*mcp.CallToolResult, any, error) {
	return t.call(ctx, req, http.MethodDelete, sandboxPath(in.ID, ""), nil)
}

// sandboxPath is /v1/sandboxes/{id}{suffix}, the id escaped: the route and
// the policy (H9) judge whatever the caller sent, never a path it smuggled.
func sandboxPath(id, suffix string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + suffix
}

// call makes the REST request a tool call maps to, with the caller's own
// token, and turns the answer into the tool's result.
func (t tools) call(ctx context.Context, req *mcp.CallToolRequest, method, path string, body any) (*mcp.CallToolResult, any, error) {
	var data []byte
	ctype := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		data, ctype = b, "application/json"
	}
	w := newBuffer(MaxResultBytes)
	if err := t.serve(ctx, req, method, path, data, ctype, w); err != nil {
		return nil, nil, err
	}
	return result(w), nil, nil
}

// serve makes one REST request, with the caller's own token, and has the
// gateway's handler answer it into w. body, when not nil, is sent with
// its length and ctype.
func (t tools) serve(ctx context.Context, req *mcp.CallToolRequest, method, path string, body []byte, ctype string, w http.ResponseWriter) error {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return errors.New("sandgate: no authenticated caller") // RequireBearerToken runs first: never reached
	}
	raw, _ := extra.TokenInfo.Extra[rawTokenKey].(string)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body) // its length becomes the Content-Length
	}
	hreq, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return err
	}
	hreq.Header.Set("Authorization", "Bearer "+raw)
	if ctype != "" {
		hreq.Header.Set("Content-Type", ctype)
	}
	hreq.Header.Set("X-Request-Id", "mcp")
	hreq.RemoteAddr = "mcp"
	t.cfg.API().ServeHTTP(w, hreq)
	return nil
}

// result is the tool result of a REST answer: its body as text (and as
// structured content when it is a JSON object), an error result for a
// 4xx or 5xx, and a note when the text was cut at MaxResultBytes.
func result(w *buffer) *mcp.CallToolResult {
	text := w.body.String()
	if w.status == http.StatusNoContent && text == "" {
		text = `{"status":204}`
	}
	res := &mcp.CallToolResult{IsError: w.status >= http.StatusBadRequest}
	var obj map[string]any
	if !w.cut && json.Unmarshal(w.body.Bytes(), &obj) == nil {
		res.StructuredContent = obj
	}
	if w.cut {
		text += fmt.Sprintf("\n[sandgate: the answer was cut at %d bytes]", MaxResultBytes)
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	return res
}

// buffer is an http.ResponseWriter that keeps the status, the headers and
// the first max bytes of the body.
type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
	max    int
	cut    bool
}

func newBuffer(max int) *buffer { return &buffer{header: http.Header{}, max: max} }

// Header is the answer's header map.
func (b *buffer) Header() http.Header { return b.header }

// WriteHeader keeps the first status written.
func (b *buffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

// Write keeps the body up to max bytes and notes a cut.
func (b *buffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if room := b.max - b.body.Len(); len(p) > room {
		b.body.Write(p[:max(room, 0)])
		b.cut = true
		return len(p), nil
	}
	return b.body.Write(p)
}
