package gateway

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/audit"
	"sandgate/gateway/token"
	"sandgate/gateway/wire"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
	"sandgate/store/bolt"
)

// The fuzz targets of the *_fuzz_test.go files in this package drive the
// gateway's own request pipeline: Echo with the production middleware
// (request id, panic recovery, metrics, body limit), authentication and
// the authz decision on the embedded bundle. On the routes whose
// handler would reach Nomad, the handler is replaced by one that only
// captures what reached it, so a target can check what the pipeline let
// through; everything before the handler is production code.

// fuzzSandboxID is the running sandbox the session token is bound to;
// fuzzEndedID an ended one (listed only with ?all=true).
const (
	fuzzSandboxID = "fuzzsbx00000001"
	fuzzEndedID   = "fuzzsbx00000002"
	fuzzAgent     = "fuzz-agent"
)

// fuzzAgentPrincipal is how records and lists name the agent.
var fuzzAgentPrincipal = policies.PrincipalFacts{Role: string(token.RoleAgent), Sub: fuzzAgent}.ID()

// pipeline is one in-process gateway for fuzzing, built once per fuzz
// process (each fuzz worker builds its own).
type pipeline struct {
	srv      *Server
	settings policies.Settings
	// tokens by placeholder: {op}, {agent}, {session}, {revoked}.
	tokens map[string]string
}

// captured is what a replaced handler saw.
type captured struct {
	reached bool
	body    requestBody
	query   policies.RequestQuery
	qerr    error
	files   filesQuery
	ferr    error
}

type capturedKey struct{}

var fuzzEngine = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

func newPipeline(f *testing.F) *pipeline {
	f.Helper()
	engine, err := fuzzEngine()
	if err != nil {
		f.Fatal(err)
	}
	_, simURL := nomadsim.NewTestServer(f, nomadsim.DefaultConfig())
	ncfg := nomad.DefaultConfig()
	ncfg.Address = simURL
	ncfg.JobPrefix = engine.Settings().Prefix
	nc, err := nomad.New(ncfg)
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "sandgate.db"), bolt.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	// Small rotated files: a long fuzz run writes a decision per input.
	dl, err := audit.Open(audit.Config{Path: filepath.Join(dir, "decisions.jsonl"), MaxBytes: 1 << 20, Keep: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = dl.Close() })
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tcfg := token.DefaultConfig()
	tcfg.Key = key
	iss, err := token.New(tcfg)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(Config{
		Engine: engine, Store: st, Nomad: nc, Tokens: iss, Decisions: dl,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Simulated: true,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	p := &pipeline{srv: srv, settings: engine.Settings(), tokens: map[string]string{}}
	ctx := context.Background()
	mint := func(role token.Role, sub string) (string, store.Token) {
		raw, rec, err := MintToken(ctx, iss, st, p.settings, TokenRequest{Role: role, Subject: sub, TTL: time.Hour})
		if err != nil {
			f.Fatal(err)
		}
		return raw, rec
	}
	p.tokens["{op}"], _ = mint(token.RoleOperator, "fuzz-operator")
	p.tokens["{agent}"], _ = mint(token.RoleAgent, fuzzAgent)
	var revoked store.Token
	p.tokens["{revoked}"], revoked = mint(token.RoleAgent, "fuzz-revoked")
	if err := st.RevokeToken(ctx, revoked.JTI, time.Now()); err != nil {
		f.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, id := range []string{fuzzSandboxID, fuzzEndedID} {
		raw, claims, err := iss.Mint(token.MintRequest{Role: token.RoleSession, Subject: id, SandboxID: id,
			Scopes: p.settings.SessionScopes(), ExpiresAt: now.Add(4 * time.Hour)})
		if err != nil {
			f.Fatal(err)
		}
		rec := store.Sandbox{ID: id, JobID: p.settings.Prefix + id, Node: "worker-1", Principal: fuzzAgentPrincipal,
			Profile: "strict", Network: "none", Image: "ubuntu:24.04", CPUMHz: 500, MemoryMB: 512,
			State: store.StateStarting, CreatedAt: now, ExpiresAt: now.Add(time.Hour), CeilingAt: now.Add(4 * time.Hour),
			TokenDigest: token.Digest(raw), TokenJTI: claims.ID}
		if err := st.Reserve(ctx, rec, func(store.ReserveFacts) error { return nil }); err != nil {
			f.Fatal(err)
		}
		final := store.StateRunning
		if id == fuzzEndedID {
			final = store.StateEnded
		} else {
			p.tokens["{session}"] = raw
		}
		if _, err := st.Update(ctx, id, func(r *store.Sandbox) error {
			r.State, r.AllocID = final, "0b6cd2c7-3bde-4a6f-9d0e-6f3f4f3a5c11"
			return nil
		}); err != nil {
			f.Fatal(err)
		}
	}
	return p
}

// capture replaces the handler of method+path with one that records what
// reached it and answers 200; the route's middleware (authentication, its
// rate limit (Q1) and authorization with the route's own body type) stays.
func (p *pipeline) capture(f *testing.F, method, path string) {
	f.Helper()
	for _, r := range p.srv.routes() {
		if r.method != method || r.path != path {
			continue
		}
		p.srv.e.Add(method, path, func(c echo.Context) error {
			got, _ := c.Request().Context().Value(capturedKey{}).(*captured)
			if got == nil {
				return c.NoContent(http.StatusOK)
			}
			got.reached = true
			got.body = bodyOf[requestBody](c)
			got.query, got.qerr = logsQuery(c)
			got.files, got.ferr = parseFilesQuery(c)
			return c.NoContent(http.StatusOK)
		}, p.srv.middleware(r)...)
		return
	}
	f.Fatalf("no route %s %s", method, path)
}

// answer is one response of the pipeline.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	problem Problem
	got     captured
}

// serve runs one request through the whole Echo instance. target is the
// escaped request target (path and query); auth is the Authorization
// header with the token placeholders ({op}, ...) expanded, or "" for none.
// ok is false when net/http would refuse the request itself (a target
// that does not parse, a header value with a control character) and when
// the gateway refused its headers as too large (431, before routing).
func (p *pipeline) serve(method, target, auth string, body []byte) (answer, bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil || !validHeaderValue(auth) {
		return answer{}, false
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, "/", rd)
	req.URL, req.RequestURI = u, target
	if auth != "" {
		req.Header.Set(echo.HeaderAuthorization, p.expand(auth))
	}
	if body != nil {
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	var a answer
	req = req.WithContext(context.WithValue(req.Context(), capturedKey{}, &a.got))
	rec := httptest.NewRecorder()
	p.srv.e.ServeHTTP(rec, req)
	a.status, a.header, a.body = rec.Code, rec.Header(), rec.Body.Bytes()
	if a.status >= 400 {
		_ = json.Unmarshal(a.body, &a.problem)
	}
	return a, a.status != http.StatusRequestHeaderFieldsTooLarge
}

// expand replaces the token placeholders in s by this process's tokens.
func (p *pipeline) expand(s string) string {
	for k, v := range p.tokens {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// validHeaderValue is net/http's rule for a field value: no control
// character but tab (the server answers 400 before any handler).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// checkProblem fails unless a is a problem+json answer with a known code
// whose status is one of allowed, and never a 5xx.
func checkProblem(t *testing.T, a answer, allowed ...int) {
	t.Helper()
	if a.status >= 500 {
		t.Fatalf("a %d for untrusted input: %s", a.status, a.body)
	}
	if !slices.Contains(allowed, a.status) {
		t.Fatalf("status %d, want one of %v: %s", a.status, allowed, a.body)
	}
	if ct := a.header.Get(echo.HeaderContentType); ct != "application/problem+json" {
		t.Fatalf("a %d with Content-Type %q: %s", a.status, ct, a.body)
	}
	p := a.problem
	if p.Status != a.status || p.Code == "" || wire.Title(p.Code) == "" || p.Type != problemTypeBase+p.Code || p.RequestID == "" {
		t.Fatalf("not a complete problem document: %s", a.body)
	}
	switch a.status {
	case http.StatusBadRequest:
		if p.Code != wire.CodeInvalidRequest || p.Field == "" || !strings.HasPrefix(p.Detail, p.Field+": ") {
			t.Fatalf("a 400 that does not name its field: %s", a.body)
		}
	case http.StatusUnauthorized:
		if a.header.Get(echo.HeaderWWWAuthenticate) == "" || (p.Code != wire.CodeUnauthenticated && p.Code != wire.CodeTokenExpired) {
			t.Fatalf("a 401 without its challenge or code: %s", a.body)
		}
	case http.StatusForbidden:
		if p.Code != wire.CodePolicyDenied || len(p.RuleIDs) == 0 || p.DecisionID == "" {
			t.Fatalf("a 403 without rule ids or decision: %s", a.body)
		}
	}
}

// ruleIDsWithin fails unless every rule id of a's problem is in want.
func ruleIDsWithin(t *testing.T, a answer, want ...string) {
	t.Helper()
	for _, id := range a.problem.RuleIDs {
		if !slices.Contains(want, id) {
			t.Fatalf("refused by %v, want only rules among %v: %s", a.problem.RuleIDs, want, a.body)
		}
	}
}
