package attack

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// world is one gateway in-process on the Nomad simulator, with the names
// the cases refer to: tokens (raw bearer strings), their jtis, and
// sandbox ids.
type world struct {
	t       testing.TB
	gw      *gatewaytest.Gateway
	engine  *policies.Engine
	srv     *gateway.Server
	sim     *nomadsim.Server
	nc      *nomad.Client
	st      store.Store
	iss     *token.Issuer
	key     ed25519.PrivateKey
	clock   *gatewaytest.Clock // shared by the gateway and the token issuer
	url     string
	dataDir string

	// tokens maps a name to a raw bearer token; jtis to its jti.
	tokens map[string]string
	jtis   map[string]string
	// ids maps a name to a sandbox id.
	ids map[string]string
	// nomad caches the snapshot's Nomad listings (see nomadView).
	nomad *nomadView
}

// attackEngine is the embedded bundle with rate limits (rule Q1) no case
// reaches, compiled once: the suite sends hundreds of requests per token on
// a clock that stands still, so the embedded numbers would refuse all but
// the first few with 429 rate_limited. Every other rule and value is the
// embedded bundle's; fair use has its own tests (gateway/middleware_ratelimit_test.go).
var (
	attackEngineOnce sync.Once
	attackEngine     *policies.Engine
	attackEngineErr  error
)

func sharedAttackEngine(t testing.TB) *policies.Engine {
	t.Helper()
	attackEngineOnce.Do(func() {
		dir := gatewaytest.BundleWithRateLimits(t, gatewaytest.GenerousRateLimits())
		attackEngine, attackEngineErr = policies.New(context.Background(), policies.Config{Dir: dir})
	})
	if attackEngineErr != nil {
		t.Fatal(attackEngineErr)
	}
	return attackEngine
}

// newWorld starts a gateway on a fresh simulator (worker-1, worker-2 for
// egress, control-1), bbolt store and decision log, with a fake clock and
// one operator token "op". No background loop runs (no reaper, reconcile
// or usage monitor): the only changes are the ones requests make.
func newWorld(t testing.TB) *world {
	t.Helper()
	g := gatewaytest.New(t, gatewaytest.Options{
		Engine:      sharedAttackEngine(t),
		Clock:       gatewaytest.NewClock(time.Now().UTC().Truncate(time.Second)),
		SimConfig:   func(c *nomadsim.Config) { c.RunDelay = 5 * time.Millisecond },
		NomadConfig: func(c *nomad.Config) { c.PollInterval = 5 * time.Millisecond },
	})
	w := &world{
		t: t, gw: g, engine: g.Engine, srv: g.Server, sim: g.Sim, nc: g.Nomad, st: g.Store, iss: g.Issuer, key: g.Key,
		clock: g.Clock, url: g.URL, dataDir: g.DataDir,
		tokens: map[string]string{}, jtis: map[string]string{}, ids: map[string]string{},
	}
	w.mint("op", token.RoleOperator, "ops", 0)
	return w
}

func (w *world) decisionLog() string { return filepath.Join(w.dataDir, gatewaytest.DecisionLogFile) }

// mint records an operator or agent token with its role's scopes (quota 0:
// the policy default) under name.
func (w *world) mint(name string, role token.Role, sub string, quota int64) string {
	w.t.Helper()
	return w.mintScoped(name, role, sub, quota, w.engine.Settings().RoleScopes(string(role)))
}

// mintScoped is mint with the given scopes.
func (w *world) mintScoped(name string, role token.Role, sub string, quota int64, scopes []string) string {
	w.t.Helper()
	return w.mintFull(name, role, sub, quota, scopes, 24*time.Hour)
}

// mintFull records a token with every choice made by the caller.
func (w *world) mintFull(name string, role token.Role, sub string, quota int64, scopes []string, ttl time.Duration) string {
	w.t.Helper()
	raw, jti := w.gw.MintWith(token.MintRequest{Role: role, Subject: sub, Scopes: scopes, TTL: ttl}, quota)
	w.tokens[name], w.jtis[name] = raw, jti
	return raw
}

// revoke revokes a named token the way the API does.
func (w *world) revoke(name string) {
	w.t.Helper()
	r := w.api(w.t).DoWith(apitest.Request{Method: http.MethodDelete, Path: "/v1/tokens/" + w.jtis[name], Auth: "Bearer " + w.tokens["op"]})
	if r.Status != http.StatusNoContent {
		w.t.Fatalf("revoke %s: %d %s", name, r.Status, r.Body)
	}
}

// create makes a sandbox as the named token; the id is kept under name and
// its session token under "sess:"+name.
func (w *world) create(name, as, body string) string {
	w.t.Helper()
	var b any // "" sends no body
	if body != "" {
		b = body
	}
	c := apitest.ExpectCreated(w.t, w.api(w.t).Do(http.MethodPost, "/v1/sandboxes", w.tokens[as], b))
	if c.State != "running" {
		w.t.Fatalf("create %s as %s: state %q: %v", name, as, c.State, c.Body)
	}
	w.ids[name], w.tokens["sess:"+name] = c.ID, c.Token
	return c.ID
}

// destroy ends a named sandbox as the operator.
func (w *world) destroy(name string) {
	w.t.Helper()
	r := w.api(w.t).DoWith(apitest.Request{Method: http.MethodDelete, Path: "/v1/sandboxes/" + w.ids[name], Auth: "Bearer " + w.tokens["op"]})
	if r.Status != http.StatusNoContent {
		w.t.Fatalf("destroy %s: %d %s", name, r.Status, r.Body)
	}
}

// createFailed makes a sandbox whose registration Nomad refuses: its
// record is failed (register_failed), its job purged. The id is kept
// under name.
func (w *world) createFailed(name, as string) string {
	w.t.Helper()
	w.sim.InjectFault(nomadsim.Fault{Method: http.MethodPut, PathPrefix: "/v1/jobs", Status: http.StatusInternalServerError, Body: "injected", Times: 1})
	before := w.liveAndDeadIDs()
	r := w.api(w.t).DoWith(apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes", Auth: "Bearer " + w.tokens[as]})
	w.sim.ClearFaults()
	if r.Status != http.StatusServiceUnavailable {
		w.t.Fatalf("create with a failing register: %d %s", r.Status, r.Body)
	}
	for _, rec := range w.records(w.t) {
		if !before[rec.ID] && rec.State == store.StateFailed {
			w.ids[name] = rec.ID
			return rec.ID
		}
	}
	w.t.Fatalf("no failed record after a refused registration: %+v", w.records(w.t))
	return ""
}

func (w *world) records(t testing.TB) []store.Sandbox {
	t.Helper()
	recs, err := w.st.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// Lists leave the rendered job out; the snapshot compares it too.
	for i := range recs {
		if recs[i].Spec, err = w.st.Spec(context.Background(), recs[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	return recs
}

func (w *world) liveAndDeadIDs() map[string]bool {
	m := map[string]bool{}
	for _, r := range w.records(w.t) {
		m[r.ID] = true
	}
	return m
}

// expand replaces {name} with the sandbox id, {jti:name} with the token's
// jti and {tok:name} with the raw token.
func (w *world) expand(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		j := strings.IndexByte(s[max(i, 0):], '}')
		if i < 0 || j < 0 {
			b.WriteString(s)
			return b.String()
		}
		j += i
		key := s[i+1 : j]
		val, ok := "", false
		switch {
		case strings.HasPrefix(key, "jti:"):
			val, ok = w.jtis[strings.TrimPrefix(key, "jti:")]
		case strings.HasPrefix(key, "tok:"):
			val, ok = w.tokens[strings.TrimPrefix(key, "tok:")]
		default:
			val, ok = w.ids[key]
		}
		if !ok { // not a name: JSON or a literal brace
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(val)
		s = s[j+1:]
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// api is the gateway's API as t speaks it; Send on it never fails t,
// so any goroutine may call it.
func (w *world) api(t testing.TB) *apitest.API {
	return &apitest.API{T: t, URL: w.url, HTTP: httpClient}
}

// policyRoutes is the policy data's route table: "METHOD template" -> the
// roles that may call it.
func policyRoutes(t testing.TB) map[string][]string {
	t.Helper()
	data, err := fs.ReadFile(policies.EmbeddedBundle(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sandgate struct {
			Config struct {
				// method -> Echo route template -> entry
				Routes map[string]map[string]struct {
					Roles []string `json:"roles"`
				} `json:"routes"`
			} `json:"config"`
		} `json:"sandgate"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for method, byRoute := range doc.Sandgate.Config.Routes {
		for route, r := range byRoute {
			out[method+" "+route] = r.Roles
		}
	}
	if len(out) < 10 {
		t.Fatalf("the policy data lists only %d routes", len(out))
	}
	return out
}
