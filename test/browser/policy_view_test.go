package browser_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"sandgate/policies"
	"sandgate/policies/policytest"
)

// policyView reads the policy in force and replays a candidate that frees
// a refused exec timeout: the dashboard shows the deny→allow flip.
func policyView(t *testing.T, b *tab, g *gateway, bin string) {
	t.Helper()
	status, sbx := g.call(t, http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{})
	id, _ := sbx["id"].(string)
	session, _ := sbx["token"].(string)
	if status != http.StatusCreated || id == "" {
		t.Fatalf("create: %d %v", status, sbx)
	}
	if status, _ := g.call(t, http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"sleep", "1"}, "timeout_seconds": 600}); status != http.StatusForbidden {
		t.Fatalf("an exec past the timeout bound: %d", status)
	}
	// The candidate's own tests are one small test per entrypoint: the
	// shipped ones hold the bound the candidate lifts.
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	lifted := false
	policytest.EditFile(t, dir, "data.json", func(data []byte) []byte {
		lifted = strings.Contains(string(data), `"max_timeout_seconds": 120`)
		return []byte(strings.Replace(string(data), `"max_timeout_seconds": 120`, `"max_timeout_seconds": 86400`, 1))
	}, &lifted)
	candidate := filepath.Join(t.TempDir(), "candidate.tar.gz")
	if out, err := exec.Command(bin, "policy", "build", "--dir", dir, "--revision", "browser-candidate", "-o", candidate).CombinedOutput(); err != nil { //nolint:gosec // G204: the binary the test built
		t.Fatalf("policy build: %v\n%s", err, out)
	}
	if _, err := os.Stat(candidate); err != nil {
		t.Fatal(err)
	}
	b.do(step, "open the policy view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="policy"]`)),
		chromedp.WaitVisible(chromedp.ID("view-policy")))
	b.waitTrue(step, "the rules in force", `document.querySelectorAll('#policy-table tbody tr[data-rule="H1"][data-mode="deny"]').length >= 1`)
	if s := eval[string](b, `document.getElementById('policy-summary').textContent`); !strings.Contains(s, "revision ") || !strings.Contains(s, "unsigned") {
		t.Fatalf("the policy summary: %q", s)
	}
	b.do(step, "replay the candidate",
		chromedp.SetUploadFiles(chromedp.ID("replay-file"), []string{candidate}),
		chromedp.Click(chromedp.ID("replay-submit")))
	b.waitTrue(step, "the replay's deny→allow flip", `!!document.querySelector('#replay-table tbody tr[data-kind="deny_to_allow"][data-rule="E2"]')`)
	if s := eval[string](b, `document.getElementById('replay-summary').textContent`); !strings.Contains(s, "browser-candidate") || !strings.Contains(s, "sign-off is due") {
		t.Fatalf("the replay summary: %q", s)
	}
}
