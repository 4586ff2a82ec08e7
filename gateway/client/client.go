// Package client is a typed Go client of the sandgate REST API
// (docs/api.md): sandboxes, their files, hosts, tokens and decisions.
//
// It imports only the standard library, so agents and tools can use it
// without pulling in the gateway. Every method takes a context first and
// does one HTTP request. Every answer outside 2xx becomes a *Problem error
// (errors.As finds it), carrying the RFC 9457 problem document the gateway
// wrote: the stable code, the policy's rule ids and the decision id.
// Transport failures are returned wrapped and name the address that failed.
//
// The client never logs, prints or puts the bearer token into an error.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config configures a Client. Addr is required; the zero values of the
// other fields take the defaults of DefaultConfig.
type Config struct {
	// Addr is the gateway's base URL, e.g. "http://127.0.0.1:8080" or
	// "https://sandgate.example.com/prefix". Only http and https are
	// accepted; a trailing slash is ignored.
	Addr string
	// Token is the bearer token sent with every request (operator, agent
	// or session). Empty sends none: only the public endpoints answer then.
	Token string
	// HTTPClient does the requests; nil means a private client with a
	// 5 minute timeout (an exec may last 120 s plus grace, a create may
	// wait 120 s). Cancel a call early through its context.
	HTTPClient *http.Client
	// UserAgent is sent as User-Agent; default "sandgate-client".
	UserAgent string
}

// DefaultConfig returns the defaults: the local development gateway, no
// token, the default HTTP client and user agent.
func DefaultConfig() Config {
	return Config{Addr: "http://127.0.0.1:8080", UserAgent: "sandgate-client"}
}

// String describes the configuration without its token.
func (c Config) String() string {
	tok := "none"
	if c.Token != "" {
		tok = "[redacted]"
	}
	return fmt.Sprintf("client.Config{Addr: %q, Token: %s, UserAgent: %q}", c.Addr, tok, c.UserAgent)
}

// GoString is String: %#v must not print the token either.
func (c Config) GoString() string { return c.String() }

// ErrInvalidConfig is wrapped by New when the Config cannot work.
var ErrInvalidConfig = errors.New("client: invalid config")

func (c *Config) defaults() {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 5 * time.Minute}
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultConfig().UserAgent
	}
}

// validate checks the address and that the token can be sent in a header
// as it is (no spaces or control characters that a header would mangle).
func (c *Config) validate() (*url.URL, error) {
	if c.Addr == "" {
		return nil, fmt.Errorf("%w: Addr is required", ErrInvalidConfig)
	}
	u, err := url.Parse(strings.TrimRight(c.Addr, "/"))
	if err != nil {
		return nil, fmt.Errorf("%w: Addr %q is not a URL like http://127.0.0.1:8080", ErrInvalidConfig, c.Addr)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: Addr %q must start with http:// or https://", ErrInvalidConfig, c.Addr)
	case u.Host == "":
		return nil, fmt.Errorf("%w: Addr %q has no host", ErrInvalidConfig, c.Addr)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%w: Addr %q must not carry a query, fragment or user info", ErrInvalidConfig, c.Addr)
	}
	for _, r := range c.Token {
		if r <= ' ' || r >= 0x7f {
			return nil, fmt.Errorf("%w: Token holds a space, control or non-ASCII character", ErrInvalidConfig)
		}
	}
	for _, r := range c.UserAgent {
		if r < ' ' || r == 0x7f {
			return nil, fmt.Errorf("%w: UserAgent holds a control character", ErrInvalidConfig)
		}
	}
	return u, nil
}

// Client is a sandgate API client. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	ua    string
}

// New validates cfg, fills its defaults and returns a Client. It does no
// I/O; Capabilities is a cheap first call to check the address.
func New(cfg Config) (*Client, error) {
	cfg.defaults()
	u, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Client{base: u, token: cfg.Token, http: cfg.HTTPClient, ua: cfg.UserAgent}, nil
}

// Addr is the base URL the client talks to.
func (c *Client) Addr() string { return c.base.String() }

// maxBody bounds a response body read into memory (a 500-decision list,
// an exec result with two 64 KiB streams escaped, are well below).
const maxBody = 16 << 20

// request is one API call.
type request struct {
	method string
	// path is the escaped path below the base URL, e.g. "/v1/sandboxes/abc".
	path  string
	query url.Values
	// in is JSON-encoded as the body when not nil.
	in any
	// out receives the decoded JSON answer when not nil; a *[]byte
	// receives the raw body.
	out any
	// header holds extra request headers (Idempotency-Key).
	header http.Header
	// raw, when not nil, is sent as the body as it is, rawSize bytes of
	// application/octet-stream (a file PUT); in is then ignored.
	raw     io.Reader
	rawSize int64
}

// do sends r and decodes the answer. A non-2xx answer is a *Problem.
func (c *Client) do(ctx context.Context, r request) error {
	resp, target, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	return decodeJSON(resp, target, r)
}

// decodeJSON reads a 2xx answer's body, at most maxBody bytes, into r.out.
func decodeJSON(resp *http.Response, target string, r request) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return transportError(r.method, target, err)
	}
	if len(data) > maxBody {
		return fmt.Errorf("client: %s %s: the answer exceeds %d bytes", r.method, target, maxBody)
	}
	switch out := r.out.(type) {
	case nil:
		return nil
	case *[]byte:
		*out = data
		return nil
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("client: %s %s: the %d answer is not the expected JSON: %w", r.method, target, resp.StatusCode, err)
		}
		return nil
	}
}

// send sends r and returns a 2xx answer with its body unread (the caller
// closes it) and the URL it went to. A non-2xx answer is a *Problem, its
// body read and closed.
func (c *Client) send(ctx context.Context, r request) (*http.Response, string, error) {
	target := c.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	switch {
	case r.raw != nil:
		body = r.raw
	case r.in != nil:
		b, err := json.Marshal(r.in)
		if err != nil {
			return nil, target, fmt.Errorf("client: encode %s %s: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, target, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	switch {
	case r.raw != nil:
		req.ContentLength = r.rawSize
		if r.rawSize == 0 {
			req.Body = http.NoBody // net/http reads a zero length with a body as unknown
		}
		req.GetBody = nil // a raw body is read once
		req.Header.Set("Content-Type", "application/octet-stream")
	case r.in != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json, text/plain")
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, target, transportError(r.method, target, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer func() { _ = resp.Body.Close() }()
		return nil, target, readProblem(resp)
	}
	return resp, target, nil
}

// TransportError is a call that got no complete answer: the connection
// failed, timed out, was cancelled or broke mid-answer. errors.Is finds
// context.Canceled and context.DeadlineExceeded through it.
type TransportError struct {
	Method string
	// URL is the address that failed. It carries no token: tokens travel
	// in a header only.
	URL string
	Err error
}

// Error reads "client: GET http://127.0.0.1:8080/v1/sandboxes: connection refused".
func (e *TransportError) Error() string {
	return fmt.Sprintf("client: %s %s: %v", e.Method, e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// transportError unwraps the url.Error so its cause reads once.
func transportError(method, u string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &TransportError{Method: method, URL: u, Err: err}
}
