package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"sandgate/gateway/client"
)

// A gateway that refuses the exec by policy, as the real one does for a
// session token used on another sandbox.
func fakeDenyingGateway() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes" {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"k7x2","state":"running","node":"worker-1","token":"eyJ..."}`)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"status":403,"code":"policy_denied","detail":"T2: session token is bound to another sandbox",
		  "rule_ids":["T2"],"decision_id":"5f0c"}`)
	}))
}

func Example() {
	srv := fakeDenyingGateway()
	defer srv.Close()
	ctx := context.Background()

	c, err := client.New(client.Config{Addr: srv.URL, Token: "operator-token"})
	if err != nil {
		fmt.Println(err)
		return
	}
	sbx, err := c.CreateSandbox(ctx, client.CreateRequest{Profile: new("strict"), TTLSeconds: new(int64(600))})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sbx.ID, sbx.State, "on", sbx.Node, "session token received:", sbx.Token != "")

	_, err = c.Exec(ctx, "another-sandbox", client.ExecRequest{Argv: []string{"echo", "hi"}})
	var p *client.Problem
	if errors.As(err, &p) && p.Denied() {
		fmt.Println(p.Status, p.Code, p.RuleIDs, p.DecisionID)
	}
	// Output:
	// k7x2 running on worker-1 session token received: true
	// 403 policy_denied [T2] 5f0c
}
