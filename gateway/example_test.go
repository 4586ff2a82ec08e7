package gateway_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// Wiring a gateway: the policy engine, a store, a Nomad client (here on the
// simulator), a token issuer and a decision log. Then an operator creates a
// sandbox over HTTP.
func ExampleNew() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sandgate-example")
	defer os.RemoveAll(dir)

	sim, _ := nomadsim.New(nomadsim.DefaultConfig())
	simHTTP := httptest.NewServer(sim.Handler())
	sim.SetAddress(simHTTP.Listener.Addr().String())
	defer func() { sim.Close(); simHTTP.Close() }()

	engine, _ := policies.New(ctx, policies.Config{})
	st, _ := bolt.Open(filepath.Join(dir, "sandgate.db"), bolt.Options{})
	defer st.Close()
	_ = st.PutNode(ctx, store.Node{Name: "worker-1", Enrollment: "sandbox", State: "active"})
	ncfg := nomad.DefaultConfig()
	ncfg.Address, ncfg.JobPrefix = simHTTP.URL, engine.Settings().Prefix
	nc, _ := nomad.New(ncfg)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tcfg := token.DefaultConfig()
	tcfg.Key = key
	iss, _ := token.New(tcfg)
	decisions, _ := audit.Open(audit.Config{Path: filepath.Join(dir, "decisions.jsonl")})
	defer decisions.Close()

	srv, err := gateway.New(gateway.Config{
		Engine: engine, Store: st, Nomad: nc, Tokens: iss, Decisions: decisions,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	api := httptest.NewServer(srv.Handler())
	defer api.Close()

	// Operator and agent tokens must be recorded in the store to be accepted.
	raw, c, _ := iss.Mint(token.MintRequest{Role: token.RoleOperator, Subject: "ops", Scopes: engine.Settings().RoleScopes("operator"), TTL: time.Hour})
	_ = st.PutToken(ctx, store.Token{JTI: c.ID, Role: "operator", Subject: "ops", CreatedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time})

	req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/sandboxes", strings.NewReader(`{"ttl_seconds": 600}`))
	req.Header.Set("Authorization", "Bearer "+raw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"state":"running"`), strings.Contains(string(body), `"token":"`))
	// Output: 201 true true
}
