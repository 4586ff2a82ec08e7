package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// harness is the whole gateway in-process on the Nomad simulator, with a
// real bbolt file, real JWTs, the embedded bundle (or policyDir's) and a
// real decision log (gatewaytest builds it), under the names this
// package's tests use.
type harness struct {
	t        testing.TB
	gw       *gatewaytest.Gateway
	nc       *nomad.Client
	srv      *gateway.Server
	sim      *nomadsim.Server
	st       store.Store
	iss      *token.Issuer
	engine   *policies.Engine
	clock    *gatewaytest.Clock // nil unless harnessOptions.fake
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
	// logInputs keeps the masked inputs in the decision log.
	logInputs bool
	// keepalive overrides Config.KeepaliveInterval of streaming execs.
	keepalive time.Duration
	// config, when set, adjusts the gateway's Config last.
	config func(*gateway.Config)
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	g := gatewaytest.Options{
		PolicyDir: o.policyDir, Nodes: o.nodes, SimConfig: o.simConfig, WrapStore: o.wrapStore, ObserveNomad: true,
		Config: func(c *gateway.Config) {
			c.StartTimeout, c.LogInputs, c.KeepaliveInterval = o.startTimeout, o.logInputs, o.keepalive
			// Every create reads Nomad's allocations: tests place outside
			// jobs between creates (TestCreatesReuseARecentAllocationsRead
			// checks the cache).
			c.AllocatedTTL = -1
			if o.config != nil {
				o.config(c)
			}
		},
	}
	if o.fake {
		g.Clock = gatewaytest.NewClock(time.Now().UTC().Truncate(time.Second))
	}
	return harnessOf(t, gatewaytest.New(t, g))
}

// harnessOf names gw's parts as the tests do and mints the operator's
// token.
func harnessOf(t testing.TB, gw *gatewaytest.Gateway) *harness {
	t.Helper()
	h := &harness{
		t: t, gw: gw, nc: gw.Nomad, srv: gw.Server, sim: gw.Sim, st: gw.Store, iss: gw.Issuer, engine: gw.Engine,
		clock: gw.Clock, url: gw.URL, dataDir: gw.DataDir, simAddr: gw.SimURL,
	}
	h.operator = h.mint(token.RoleOperator, "ops")
	return h
}

// mint records and returns an operator or agent token.
func (h *harness) mint(role token.Role, sub string) string {
	h.t.Helper()
	return h.gw.Mint(role, sub)
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
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte: // raw bytes, as a file PUT takes them (with their Content-Length)
		rd, contentType = bytes.NewReader(b), "application/octet-stream"
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
		req.Header.Set("Content-Type", contentType)
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
func (h *harness) now() time.Time { return h.gw.Now() }
