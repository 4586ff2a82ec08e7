package browser_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// mintAndRevoke mints agent tokens, closing each one-time dialog another
// way (Escape, a click on the backdrop, dialog.close() from code), and
// revokes the first; the gateway must then refuse it.
func mintAndRevoke(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	b.do(step, "open the tokens view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="tokens"]`)),
		chromedp.WaitVisible(chromedp.ID("view-tokens")))
	var first string
	for i, close := range []struct {
		how    string
		action chromedp.Action[chromedp.Void]
	}{
		{"Escape", chromedp.KeyEvent(kb.Escape)},
		{"a click on the backdrop", chromedp.MouseClickXY(5, 5)},
		{"dialog.close() from code", chromedp.Evaluate[chromedp.Void](`document.getElementById('secret-dialog').close()`)},
	} {
		b.do(step, "mint an agent token",
			fill("mint-label", fmt.Sprintf("browser test %d", i)),
			fill("mint-quota", "2"),
			chromedp.Click(chromedp.ID("mint-submit")),
			chromedp.WaitVisible(chromedp.ID("secret-dialog")),
		)
		agent := eval[string](b, `document.getElementById('secret-value').value`)
		if strings.Count(agent, ".") != 2 {
			t.Fatalf("the mint dialog shows %q, want a JWT", agent)
		}
		b.do(step, "close the dialog with "+close.how, close.action, chromedp.WaitNotVisible(chromedp.ID("secret-dialog")))
		b.secretGone("after "+close.how, agent)
		if i == 0 {
			first = agent
		}
	}
	if status, _ := g.call(t, http.MethodGet, "/v1/sandboxes", first, nil); status != http.StatusOK {
		t.Fatalf("the minted agent token does not work: %d", status)
	}

	mine := `[...document.querySelectorAll('#tokens-table tr[data-revoked="%s"]')].find((r) => r.textContent.includes('browser test 0'))`
	b.waitTrue(step, "the minted token's row", "!!"+fmt.Sprintf(mine, "false"))
	b.cellsStayCells("tokens-table")
	b.do(step, "revoke it",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(mine, "false")+`.querySelector('button.revoke').id = 'revoke-me'`),
		chromedp.Click(chromedp.ID("revoke-me")),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
	)
	b.waitTrue(step, "the row to show the revocation", "!!"+fmt.Sprintf(mine, "true"))
	if status, _ := g.call(t, http.MethodGet, "/v1/sandboxes", first, nil); status != http.StatusUnauthorized {
		t.Fatalf("the revoked token still answers %d", status)
	}
}

// expiredSignIn: a token the gateway stops accepting sends the dashboard
// back to sign-in, and the dashboard forgets it.
func expiredSignIn(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	status, tok := g.call(t, http.MethodPost, "/v1/tokens", g.operator, map[string]any{"role": "operator", "ttl_seconds": 600, "label": "short-lived"})
	secret, _ := tok["token"].(string)
	id, _ := tok["id"].(string)
	if status != http.StatusCreated || secret == "" || id == "" {
		t.Fatalf("mint an operator token: %d %v", status, tok)
	}
	b.do(step, "sign out", chromedp.Click(chromedp.ID("sign-out"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("sign-in")))
	signIn(t, b, secret)
	if status, _ := g.call(t, http.MethodDelete, "/v1/tokens/"+id, g.operator, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d", status)
	}
	b.do(step, "refresh with the revoked token",
		chromedp.Click(chromedp.ID("sandboxes-refresh")),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
	)
	if msg := eval[string](b, `document.getElementById('sign-in-message').textContent`); !strings.Contains(msg, "signed out") {
		t.Fatalf("the sign-in screen says %q after a 401", msg)
	}
	b.secretGone("after a 401", secret)
	signIn(t, b, g.operator)
}
