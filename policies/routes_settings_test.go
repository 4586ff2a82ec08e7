package policies

import (
	"encoding/json"
	"testing"
)

// RouteOpen reads T2's route table and C1's capabilities as the policy
// does: the route exists, the role is one of its roles, the token holds
// its scope and its capability is advertised. A table of another shape
// opens nothing.
func TestRouteOpenFollowsTheRouteTable(t *testing.T) {
	t.Parallel()
	var st Settings
	if err := json.Unmarshal([]byte(`{
		"capabilities": ["sandboxes.v1"],
		"routes": {"POST": {
			"/v1/sandboxes": {"capability": "sandboxes.v1", "scope": "sandboxes:create", "roles": ["operator", "agent"]},
			"/v1/sandboxes/:id/exec": {"capability": "sandboxes.exec.v1", "scope": "exec", "roles": ["session"]}
		}}}`), &st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, route, role string
		scopes                    []string
		want                      bool
	}{
		{"a role of the route with its scope", "POST", "/v1/sandboxes", "agent", []string{"sandboxes:create"}, true},
		{"a role the route does not list", "POST", "/v1/sandboxes", "session", []string{"sandboxes:create"}, false},
		{"a token without the route's scope", "POST", "/v1/sandboxes", "agent", []string{"exec"}, false},
		{"a route whose capability is not advertised", "POST", "/v1/sandboxes/:id/exec", "session", []string{"exec"}, false},
		{"a route not in the table", "GET", "/v1/sandboxes", "agent", []string{"sandboxes:list"}, false},
	} {
		if got := st.RouteOpen(tc.method, tc.route, tc.role, tc.scopes); got != tc.want {
			t.Errorf("%s: RouteOpen = %v, want %v", tc.name, got, tc.want)
		}
	}
	var odd Settings
	if err := json.Unmarshal([]byte(`{"capabilities": ["sandboxes.v1"], "routes": {"POST": {"/v1/sandboxes": "operator"}}}`), &odd); err != nil {
		t.Fatalf("a route table of another shape: %v", err)
	}
	if odd.RouteOpen("POST", "/v1/sandboxes", "operator", []string{"sandboxes:create"}) {
		t.Error("a route table of another shape opened a route")
	}
}
