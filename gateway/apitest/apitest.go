// Package apitest is the gateway's HTTP API as tests speak it, over a base
// URL: Do sends a request and returns the Reply, Create makes a sandbox,
// Exec runs a command, ExpectProblem checks a problem document. Every
// suite uses these words, whether the gateway runs in process
// (gatewaytest.Gateway offers them over its URL) or as a process
// (apitest.API over the URL it printed).
//
// It imports only the standard library, the testing package and
// internal/clip: it is for tests, and production code must never import
// it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"sandgate/internal/clip"
)

// API is the gateway's API at URL, as test T calls it.
type API struct {
	// T fails on a transport error and on a broken expectation.
	T testing.TB
	// URL is the base URL (http://127.0.0.1:port), without a trailing
	// slash.
	URL string
	// HTTP sends the requests; nil is http.DefaultClient.
	HTTP *http.Client
}

// Reply is an HTTP answer, its body read in full.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as a JSON object; anything else fails t.
func (r Reply) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil || m == nil {
		t.Fatalf("status %d: the body is not a JSON object: %v: %s", r.Status, err, bodyText(r.Body))
	}
	return m
}

// Decode decodes the body into v; a body that does not decode fails t.
func (r Reply) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("status %d: the body does not decode into %T: %v: %s", r.Status, v, err, bodyText(r.Body))
	}
}

// String is the status and the body, for failure messages.
func (r Reply) String() string {
	return fmt.Sprintf("%d %s", r.Status, bodyText(bytes.TrimSpace(r.Body)))
}

// ReplyOf reads resp's body in full and closes it (closing it again is
// harmless).
func ReplyOf(resp *http.Response) (Reply, error) {
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: data}, err
}

// Request is one request with every choice Do leaves out.
type Request struct {
	Method string
	// Path is appended to the API's URL, query included.
	Path string
	// Token is sent as "Authorization: Bearer <Token>"; "" sends none.
	Token string
	// Auth, when set, is the Authorization header sent as it is, in place
	// of Token's (a malformed or foreign scheme).
	Auth string
	// Body is sent as Do sends its body.
	Body any
	// ContentType, when set, replaces the Content-Type Body implies.
	ContentType string
	// Header holds more headers (Idempotency-Key, Accept), set last.
	Header map[string]string
	// Context, when set, bounds the request; nil is
	// context.Background() (the client's timeout still applies).
	Context context.Context
}

// Do sends method path with token ("" sends no Authorization) and body,
// and returns the answer; a transport error fails the test. The body is
// sent by its type: nil sends none; a string is sent as it is, and a
// json.RawMessage and an io.Reader too (a reader of unknown length
// chunked), as application/json; a []byte as
// application/octet-stream (with its Content-Length, as a file PUT takes
// it); anything else is marshalled to JSON.
func (a *API) Do(method, path, token string, body any) Reply {
	a.T.Helper()
	return a.DoWith(Request{Method: method, Path: path, Token: token, Body: body})
}

// DoWith sends r; a transport error fails the test. Call it from the
// test's goroutine; other goroutines use Send.
func (a *API) DoWith(r Request) Reply {
	a.T.Helper()
	rep, err := a.Send(r)
	if err != nil {
		a.T.Fatalf("%s %.80s: %v", r.Method, r.Path, err)
	}
	return rep
}

// Send sends r and returns the answer or the transport error; it never
// fails the test, so any goroutine may call it.
func (a *API) Send(r Request) (Reply, error) {
	var rd io.Reader
	contentType := "application/json"
	switch b := r.Body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	case []byte:
		rd, contentType = bytes.NewReader(b), "application/octet-stream"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return Reply{}, fmt.Errorf("apitest: marshal the body: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	if r.ContentType != "" {
		contentType = r.ContentType
	}
	ctx := r.Context
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, a.URL+r.Path, rd)
	if err != nil {
		return Reply{}, err
	}
	switch {
	case r.Auth != "":
		req.Header.Set("Authorization", r.Auth)
	case r.Token != "":
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	c := a.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	return ReplyOf(resp)
}

// Created is a sandbox a create made.
type Created struct {
	ID string
	// Token is the sandbox's session token.
	Token string
	// State is its state in the answer (running, or starting when the
	// create did not wait).
	State string
	// Body is the whole answer.
	Body map[string]any
}

// IDToken returns the id and the session token, for
// `id, session := api.Create(tok, nil).IDToken()`.
func (c Created) IDToken() (id, token string) { return c.ID, c.Token }

// Create posts body (nil: {}) to /v1/sandboxes with token and returns the
// sandbox; any answer but 201 with an id and a session token fails the
// test.
func (a *API) Create(token string, body any) Created {
	a.T.Helper()
	if body == nil {
		body = map[string]any{}
	}
	return ExpectCreated(a.T, a.Do(http.MethodPost, "/v1/sandboxes", token, body))
}

// ExpectCreated reads the answer of a create: anything but a 201 with an
// id and a session token fails t.
func ExpectCreated(t testing.TB, r Reply) Created {
	t.Helper()
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	m := r.JSON(t)
	c := Created{Body: m}
	c.ID, _ = m["id"].(string)
	c.Token, _ = m["token"].(string)
	c.State, _ = m["state"].(string)
	if c.ID == "" || c.Token == "" {
		t.Fatalf("create answered no id or session token: %s", r)
	}
	return c
}

// Exec posts body to sandbox id's exec with token and returns the answer;
// anything but 200 fails the test. Reply.Decode reads the result.
func (a *API) Exec(token, id string, body any) Reply {
	a.T.Helper()
	r := a.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", token, body)
	if r.Status != http.StatusOK {
		a.T.Fatalf("exec in %s: %s", id, r)
	}
	return r
}

// bodyText is a body as a failure message quotes it: its first kilobyte.
func bodyText(b []byte) string { return clip.String(string(b), 1000) }
