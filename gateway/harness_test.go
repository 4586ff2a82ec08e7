package gateway_test

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
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/audit"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
	"sandgate/store/bolt"
)

// clock is a settable clock shared by the gateway and the token issuer.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// harness is the whole gateway in-process on the Nomad simulator, with a
// real bbolt file, real JWTs, the embedded bundle and a real decision log.
type harness struct {
	t        testing.TB
	nc       *nomad.Client
	srv      *gateway.Server
	sim      *nomadsim.Server
	st       store.Store
	iss      *token.Issuer
	engine   *policies.Engine
	clock    *clock
	url      string
	dataDir  string
	operator string
	simAddr  string
}

func (h *harness) simURL() string { return h.simAddr }

type harnessOptions struct {
	policyDir string
	nodes     []store.Node
	fake      bool // a settable clock instead of the wall clock
	simConfig func(*nomadsim.Config)
	// startTimeout overrides Config.StartTimeout.
	startTimeout time.Duration
	// wrapStore, when set, wraps the store the gateway uses (the harness
	// keeps the bare one in h.st).
	wrapStore func(store.Store) store.Store
}

var sharedEngine = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, dataDir: t.TempDir()}
	var err error
	if o.policyDir != "" {
		h.engine, err = policies.New(context.Background(), policies.Config{Dir: o.policyDir})
	} else {
		h.engine, err = sharedEngine()
	}
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now
	if o.fake {
		h.clock = &clock{t: time.Now().UTC().Truncate(time.Second)}
		now = h.clock.Now
	}

	simCfg := nomadsim.DefaultConfig()
	simCfg.RunDelay = 20 * time.Millisecond
	if o.simConfig != nil {
		o.simConfig(&simCfg)
	}
	h.sim, err = nomadsim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	simHTTP := httptest.NewServer(h.sim.Handler())
	h.sim.SetAddress(simHTTP.Listener.Addr().String())
	h.simAddr = simHTTP.URL
	t.Cleanup(func() { h.sim.Close(); simHTTP.Close() }) // the simulator first: it ends followed log streams

	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tcfg := token.DefaultConfig()
	tcfg.Key, tcfg.Now = key, now
	if h.iss, err = token.New(tcfg); err != nil {
		t.Fatal(err)
	}
	if h.st, err = bolt.Open(filepath.Join(h.dataDir, "sandgate.db"), bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.st.Close() })
	nodes := o.nodes
	if nodes == nil {
		nodes = []store.Node{
			{Name: "worker-1", Enrollment: "sandbox", State: "active"},
			{Name: "worker-2", Enrollment: "sandbox+egress", State: "active"},
		}
	}
	for _, n := range nodes {
		if err := h.st.PutNode(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	dl, err := audit.Open(audit.Config{Path: filepath.Join(h.dataDir, "decisions.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dl.Close() })

	ncfg := nomad.DefaultConfig()
	ncfg.Address = simHTTP.URL
	ncfg.JobPrefix = h.engine.Settings().Prefix
	ncfg.PollInterval = 10 * time.Millisecond
	var srvRef *gateway.Server
	ncfg.Observe = func(op string, d time.Duration, err error) {
		if srvRef != nil {
			srvRef.ObserveNomad(op, d, err)
		}
	}
	nc, err := nomad.New(ncfg)
	if err != nil {
		t.Fatal(err)
	}
	h.nc = nc
	gwStore := h.st
	if o.wrapStore != nil {
		gwStore = o.wrapStore(h.st)
	}
	h.srv, err = gateway.New(gateway.Config{
		Engine: h.engine, Store: gwStore, Nomad: nc, Tokens: h.iss, Decisions: dl,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: now, Simulated: true,
		DefaultWait: 10 * time.Second, StartTimeout: o.startTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	srvRef = h.srv
	t.Cleanup(h.srv.Close)
	api := httptest.NewServer(h.srv.Handler())
	t.Cleanup(api.Close)
	h.url = api.URL
	h.operator = h.mint(token.RoleOperator, "ops")
	return h
}

// mint records and returns an operator or agent token.
func (h *harness) mint(role token.Role, sub string) string {
	h.t.Helper()
	raw, c, err := h.iss.Mint(token.MintRequest{Role: role, Subject: sub, Scopes: h.engine.Settings().RoleScopes(string(role)), TTL: 24 * time.Hour})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.st.PutToken(context.Background(), store.Token{JTI: c.ID, Role: string(role), Subject: sub, CreatedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time}); err != nil {
		h.t.Fatal(err)
	}
	return raw
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

func (h *harness) do(method, path, tok string, body any) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// create makes a sandbox and returns its id and session token.
func (h *harness) create(tok string, body any) (string, string) {
	h.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	r := h.do(http.MethodPost, "/v1/sandboxes", tok, body)
	if r.status != http.StatusCreated {
		h.t.Fatalf("create: %d %s", r.status, r.body)
	}
	m := r.json(h.t)
	return m["id"].(string), m["token"].(string)
}

// expectProblem checks a problem+json answer's status, code and rule ids.
func expectProblem(t *testing.T, r response, status int, code string, rules ...string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	m := r.json(t)
	if m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.body)
	}
	if m["status"] != float64(status) || m["type"] == "" || m["title"] == "" || m["request_id"] == "" {
		t.Fatalf("problem lacks type/title/status/request_id: %s", r.body)
	}
	got, _ := m["rule_ids"].([]any)
	for _, want := range rules {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Fatalf("rule_ids %v lack %s: %s", got, want, r.body)
		}
	}
	return m
}

// nomadClient is the client the gateway uses, for baselines.
func (h *harness) nomadClient() *nomad.Client { return h.nc }

// now is the harness clock.
func (h *harness) now() time.Time {
	if h.clock != nil {
		return h.clock.Now()
	}
	return time.Now()
}
