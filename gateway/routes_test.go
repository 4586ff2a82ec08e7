package gateway_test

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sandgate/gateway"
	"sandgate/gateway/token"
	"sandgate/policies"
)

// denyAllBundle writes the embedded bundle to a directory with every
// role's scopes emptied: T2 then refuses every route.
func denyAllBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b := policies.EmbeddedBundle()
	err := fs.WalkDir(b, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(b, path)
		if err != nil {
			return err
		}
		if path == "data.json" {
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				return err
			}
			roles := doc["sandgate"].(map[string]any)["config"].(map[string]any)["roles"].(map[string]any)
			for name := range roles {
				roles[name] = map[string]any{"scopes": []string{}}
			}
			if data, err = json.Marshal(doc); err != nil {
				return err
			}
		}
		out := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every registered route except the public ones is refused without a token
// and refused when the policy says no: a route added without the
// middleware fails here.
func TestEveryNonPublicRouteIsRefusedWithoutATokenAndWhenThePolicyDenies(t *testing.T) {
	t.Parallel()
	open := newHarness(t, harnessOptions{})
	deny := newHarness(t, harnessOptions{policyDir: denyAllBundle(t)})
	operator := deny.mint(token.RoleOperator, "ops")
	sbx, _ := open.create(open.operator, nil)

	routes := open.srv.Echo().Routes()
	if len(routes) < 11 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	seen := 0
	for _, rt := range routes {
		path := strings.ReplaceAll(rt.Path, ":id", sbx)
		path = strings.ReplaceAll(path, ":node", "worker-1")
		path = strings.ReplaceAll(path, ":jti", "x")
		if gateway.PublicPaths[rt.Path] {
			if r := open.do(rt.Method, path, "", nil); r.status != http.StatusOK {
				t.Errorf("public %s %s: %d", rt.Method, rt.Path, r.status)
			}
			continue
		}
		seen++
		r := open.do(rt.Method, path, "", `{}`)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", rt.Method, rt.Path, r.status)
		}
		r = open.do(rt.Method, path, "not-a-jwt", `{}`)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s %s with a malformed token: %d, want 401", rt.Method, rt.Path, r.status)
		}
		body := `{}`
		if strings.HasSuffix(rt.Path, "/exec") {
			body = `{"argv":["true"]}`
		} else if strings.HasSuffix(rt.Path, "/extend") {
			body = `{"ttl_seconds":600}`
		}
		path = strings.ReplaceAll(rt.Path, ":id", "abcdefgh12345678")
		r = deny.do(rt.Method, path, operator, body)
		if r.status != http.StatusForbidden && r.status != http.StatusNotFound {
			t.Errorf("%s %s with an operator token under a deny-all policy: %d, want 403 (or 404 for an absent target)", rt.Method, rt.Path, r.status)
		}
		if !strings.Contains(string(r.body), `"rule_ids"`) || !strings.Contains(string(r.body), `"decision_id"`) {
			t.Errorf("%s %s: the refusal names no rule or decision: %s", rt.Method, rt.Path, r.body)
		}
	}
	if seen < 7 {
		t.Fatalf("only %d protected routes walked", seen)
	}
}
