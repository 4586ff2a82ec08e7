package gatewaytest_test

import (
	"net/http"
	"testing"

	"sandgate/gateway/apitest"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
)

// The in-process gateway speaks the suites' words: a create, an exec and a
// policy refusal, over its own URL.
func TestTheGatewaySpeaksTheAPIWords(t *testing.T) {
	t.Parallel()
	g := gatewaytest.New(t, gatewaytest.Options{})
	agent := g.Mint(token.RoleAgent, "words")
	id, session := g.Create(agent, nil).IDToken()
	var res struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	g.Exec(session, id, map[string]any{"argv": []string{"echo", "hi"}}).Decode(t, &res)
	if res.Stdout != "hi\n" || res.ExitCode != 0 {
		t.Fatalf("exec: %+v", res)
	}
	r := g.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"-x"}})
	apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied", "E1")
	r = g.DoWith(apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/" + id, Auth: "Basic eA=="})
	apitest.ExpectProblem(t, r, http.StatusUnauthorized, "unauthenticated")
}
