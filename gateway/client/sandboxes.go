package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"sandgate/gateway/wire"
)

// ErrInvalidArgument is wrapped when a call is refused before any request
// is sent (an empty id, a TTL below one second).
var ErrInvalidArgument = errors.New("client: invalid argument")

// segment escapes one path parameter. Empty, "." and ".." are refused: a
// server or proxy that cleans paths would read them as another route.
func segment(what, v string) (string, error) {
	switch v {
	case "", ".", "..":
		return "", fmt.Errorf("%w: %s %q", ErrInvalidArgument, what, v)
	}
	return url.PathEscape(v), nil
}

// Capabilities is GET /v1/capabilities (public: no token needed).
func (c *Client) Capabilities(ctx context.Context) (Capabilities, error) {
	var out Capabilities
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/capabilities", out: &out})
	return out, err
}

// CreateSandbox is POST /v1/sandboxes. The answer's Token is the session
// token, shown this once. A sandbox whose allocation did not run within
// the wait comes back "starting"; one that could not be placed "failed"
// (with LastError, and no token): both are answers, not errors.
func (c *Client) CreateSandbox(ctx context.Context, req CreateRequest, opts ...CreateOption) (Sandbox, error) {
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	var out Sandbox
	r := request{method: http.MethodPost, path: "/v1/sandboxes", in: req, out: &out}
	if o.idempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {o.idempotencyKey}}
	}
	err := c.do(ctx, r)
	return out, err
}

// CreateOption sets what a create sends beside its body. The body is the
// wire type itself, as the gateway decodes it; what travels as a header
// rides here instead of as a member the JSON must skip.
type CreateOption func(*createOptions)

type createOptions struct {
	idempotencyKey string
}

// WithIdempotencyKey sends key as the Idempotency-Key header, which makes
// the create safe to retry: a repeat with the same body answers the
// sandbox the key created (and, with ReissueToken, a fresh session token).
// An empty key sends no header.
func WithIdempotencyKey(key string) CreateOption {
	return func(o *createOptions) { o.idempotencyKey = key }
}

// ListSandboxes is GET /v1/sandboxes, every page: the live sandboxes the
// token may see (an agent its own), or every one, ended and failed
// included, with all. Use ListSandboxPage for one page at a time.
func (c *Client) ListSandboxes(ctx context.Context, all bool) ([]Sandbox, error) {
	var out []Sandbox
	q := ListQuery{All: all, Limit: 1000}
	for {
		page, err := c.ListSandboxPage(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Sandboxes...)
		if page.NextCursor == "" {
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
}

// ListQuery filters and pages GET /v1/sandboxes; zero fields are left out.
type ListQuery struct {
	// All includes ended and failed sandboxes (States overrides it).
	All bool
	// States, e.g. ["failed"]; empty means live ones (all with All).
	States []string
	// Principal ("agent:ci"): operators only; an agent sees its own.
	Principal string
	Node      string
	// Labels must all match.
	Labels map[string]string
	// Limit is the page size (1-1000; the gateway's default is 100).
	Limit int
	// Cursor is the previous page's NextCursor.
	Cursor string
}

// SandboxPage is one page of GET /v1/sandboxes (wire.SandboxPage):
// NextCursor reads the next page; empty on the last one.
type SandboxPage = wire.SandboxPage

// ListSandboxPage is GET /v1/sandboxes for one page.
func (c *Client) ListSandboxPage(ctx context.Context, q ListQuery) (SandboxPage, error) {
	var out SandboxPage
	v := url.Values{}
	if q.All {
		v.Set("all", "true")
	}
	if len(q.States) > 0 {
		v.Set("state", strings.Join(q.States, ","))
	}
	if q.Principal != "" {
		v.Set("principal", q.Principal)
	}
	if q.Node != "" {
		v.Set("node", q.Node)
	}
	keys := make([]string, 0, len(q.Labels))
	for k := range q.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.Add("label", k+"="+q.Labels[k])
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	r := request{method: http.MethodGet, path: "/v1/sandboxes", out: &out}
	if len(v) > 0 {
		r.query = v
	}
	err := c.do(ctx, r)
	return out, err
}

// GetSandbox is GET /v1/sandboxes/{id}. An unknown id is a *Problem with
// Code CodeSandboxNotFound.
func (c *Client) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	var out Sandbox
	seg, err := segment("sandbox id", id)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, request{method: http.MethodGet, path: "/v1/sandboxes/" + seg, out: &out})
	return out, err
}

// DestroySandbox is DELETE /v1/sandboxes/{id}: stop and purge, release the
// budget, revoke the session token. Destroying an ended sandbox again
// succeeds (operators, agents).
func (c *Client) DestroySandbox(ctx context.Context, id string) error {
	seg, err := segment("sandbox id", id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/sandboxes/" + seg})
}

// Exec is POST /v1/sandboxes/{id}/exec. The command's exit code, output
// and timeout are in the result; an error means the exec did not happen
// (a *Problem, e.g. CodeSandboxNotRunning) or its answer was lost.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	var out ExecResult
	seg, err := segment("sandbox id", id)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, request{method: http.MethodPost, path: "/v1/sandboxes/" + seg + "/exec", in: req, out: &out})
	return out, err
}

// Logs is GET /v1/sandboxes/{id}/logs: the last bytes of the task's
// stdout or stderr, as they are.
func (c *Client) Logs(ctx context.Context, id string, opts LogsOptions) ([]byte, error) {
	seg, err := segment("sandbox id", id)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.Stream != "" {
		q.Set("stream", opts.Stream)
	}
	if opts.TailBytes != 0 {
		q.Set("tail_bytes", strconv.FormatInt(opts.TailBytes, 10))
	}
	var out []byte
	err = c.do(ctx, request{method: http.MethodGet, path: "/v1/sandboxes/" + seg + "/logs", query: q, out: &out})
	return out, err
}

// Extend is POST /v1/sandboxes/{id}/extend (operators): the expiry becomes
// now+ttl (whole seconds, rounded up), never earlier than it is and never
// past the ceiling; the answer's Clamped says whether the ceiling cut it.
func (c *Client) Extend(ctx context.Context, id string, ttl time.Duration) (Sandbox, error) {
	var out Sandbox
	seg, err := segment("sandbox id", id)
	if err != nil {
		return out, err
	}
	if ttl < time.Second {
		return out, fmt.Errorf("%w: ttl %s is below one second", ErrInvalidArgument, ttl)
	}
	body := wire.ExtendRequest{TTLSeconds: new(int64(math.Ceil(ttl.Seconds())))}
	err = c.do(ctx, request{method: http.MethodPost, path: "/v1/sandboxes/" + seg + "/extend", in: body, out: &out})
	return out, err
}
