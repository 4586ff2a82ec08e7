package browser_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandgate/test/testbin"
)

const step = 15 * time.Second // the bound of one step; the whole test has 90 s

var sessionTitle = regexp.MustCompile(`^Session token for sandbox ([a-z0-9]+)$`)

// The operator's path through the dashboard in a real browser, against
// `sandgate dev` on the simulator: sign in, see a policy refusal's rule ids
// beside the create form; create a sandbox, run commands in its console,
// extend and destroy it; read a sandbox's image, resources, labels and
// ceiling; mint and revoke tokens; be sent back to sign-in by a 401; manage
// hosts; read the decisions; read the policy and replay a candidate.
// Secrets must leave the page as soon as their dialog closes, whichever way
// it closes, and nothing may reach browser storage.
func TestTheOperatorDrivesTheDashboardInARealBrowser(t *testing.T) {
	chromiumPath(t) // skip early, before the build, when there is no browser
	bin := testbin.Build(t)
	g := startGateway(t, bin)
	b := newTab(t, 90*time.Second)

	b.do(step, "open the dashboard", chromedp.Navigate(g.url+"/"))
	b.waitTrue(step, "capability detection", `document.body.classList.contains('ready')`)
	if banner := eval[string](b, `document.getElementById('upgrade-banner').hidden ? '' : document.getElementById('upgrade-banner').textContent`); banner != "" {
		t.Fatalf("the dashboard refuses this gateway: %s", banner)
	}
	if !eval[bool](b, `!document.getElementById('simulated-banner').hidden && document.getElementById('simulated-banner').textContent.includes('SIMULATED Nomad cluster')`) {
		t.Fatal("the simulated cluster is not announced")
	}
	_, caps := g.call(t, http.MethodGet, "/v1/capabilities", "", nil)
	rev, _ := caps["bundle_revision"].(string)
	if info := eval[string](b, `document.getElementById('gateway-info').textContent`); rev == "" || !strings.Contains(info, "bundle "+rev) {
		t.Fatalf("the bundle revision %q is not shown: %q", rev, info)
	}

	signIn(t, b, g.operator)
	policyRefusal(t, b)
	id := createAndExec(t, b, g)
	destroy(t, b, g, id)
	sandboxFields(t, b, g)
	mintAndRevoke(t, b, g)
	expiredSignIn(t, b, g)
	hostsView(t, b, g)
	t.Logf("screenshot of the hosts view: %s", b.screenshot("hosts.png"))
	decisionsView(t, b)
	policyView(t, b, g, bin)
	t.Logf("screenshot of the policy view: %s", b.screenshot("policy.png"))
	b.clean()
	t.Logf("screenshot of the decisions view: %s", b.screenshot("dashboard.png"))

	b.do(step, "sign out with decision filters set",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('decisions-result-denied').checked = true; document.getElementById('decisions-principal').value = 'agent:someone'`),
		chromedp.Click(chromedp.ID("sign-out"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("sign-in")))
	if rows := eval[int](b, `document.querySelectorAll('tbody tr').length`); rows != 0 {
		t.Fatalf("signing out left %d table rows of API data in the page", rows)
	}
	if !eval[bool](b, `document.getElementById('decisions-result-all').checked && document.getElementById('decisions-principal').value === '' && [...document.querySelectorAll('.form-error')].every((e) => e.hidden && e.textContent === '')`) {
		t.Fatal("signing out left the decision filters or a form's error for the next session")
	}
	b.secretGone("after sign-out", g.operator)
	b.storageEmpty("after sign-out")
}

// signIn signs an operator in: it lands on the overview; the sandboxes
// view is opened for the steps that follow.
func signIn(t *testing.T, b *tab, operator string) {
	t.Helper()
	b.do(step, "paste the operator token",
		chromedp.WaitEnabled(chromedp.ID("token-input")),
		paste("#token-input", operator),
		chromedp.Click(chromedp.ID("sign-in-button")),
		chromedp.WaitVisible(chromedp.ID("view-overview")),
	)
	b.storageEmpty("after sign-in")
	b.secretGone("after sign-in", operator)
	b.do(step, "open the sandboxes view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="sandboxes"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("view-sandboxes")))
}

// createAndExec creates a sandbox through the form, checks the one-time
// dialog, runs commands in the console and returns the sandbox id.
func createAndExec(t *testing.T, b *tab, g *gateway) string {
	t.Helper()
	b.do(step, "create a sandbox",
		fill("create-ttl", "600"),
		chromedp.Click(chromedp.ID("create-submit")),
		chromedp.WaitVisible(chromedp.ID("secret-dialog")),
	)
	session := eval[string](b, `document.getElementById('secret-value').value`)
	title := eval[string](b, `document.getElementById('secret-title').textContent`)
	m := sessionTitle.FindStringSubmatch(title)
	if m == nil || strings.Count(session, ".") != 2 {
		t.Fatalf("the one-time dialog shows %q: %q, want a session JWT", title, session)
	}
	id := m[1]
	if status, _ := g.call(t, http.MethodGet, "/v1/sandboxes/"+id, session, nil); status != http.StatusOK {
		t.Fatalf("the session token the dialog showed does not work: %d", status)
	}
	b.waitTrue(step, "the successful create to clear the form's error", `document.getElementById('create-error').hidden && document.getElementById('create-error').textContent === ''`)
	b.do(step, "close the dialog with its button",
		chromedp.Click(chromedp.ID("secret-close")), chromedp.WaitNotVisible(chromedp.ID("secret-dialog")))
	b.secretGone("after the Close button", session)

	row := fmt.Sprintf(`#sandboxes-table tr[data-id=%q]`, id)
	b.waitTrue(step, "the sandbox row to be running", fmt.Sprintf(`!!document.querySelector('%s[data-state="running"]')`, row))
	b.cellsStayCells("sandboxes-table")
	b.do(step, "open the console",
		chromedp.Click(chromedp.CSS(row+" button.open"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("sandbox-panel")))

	for _, tc := range []struct {
		name, argv, stdin, stdout, stderr, exit string
	}{
		{"echo hi", "echo hi", "", "hi\n", "", "0"},
		{"a quoted shell script with an exit code", `sh -c 'echo "a  b"; echo oops >&2; exit 3'`, "", "a  b\n", "oops\n", "3"},
		{"stdin reaches the command", `["cat"]`, "from stdin", "from stdin", "", "0"},
		{"markup in the output stays text", `echo '<img src=x id=pwned>'`, "", "<img src=x id=pwned>\n", "", "0"},
	} {
		b.do(step, "exec "+tc.name,
			fill("exec-argv", tc.argv),
			fill("exec-stdin", tc.stdin),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('exec-exit').textContent = ''`),
			chromedp.Click(chromedp.ID("exec-run")),
		)
		b.waitTrue(step, "the result of "+tc.name, `document.getElementById('exec-exit').textContent !== ''`)
		got := eval[[]string](b, `['exec-stdout', 'exec-stderr', 'exec-exit'].map((id) => document.getElementById(id).textContent)`)
		if want := []string{tc.stdout, tc.stderr, tc.exit}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("exec %s: stdout, stderr, exit = %q, want %q", tc.name, got, want)
		}
	}
	if eval[bool](b, `!!document.getElementById('pwned')`) {
		t.Fatal("exec output was parsed as HTML")
	}
	// a command that cannot be split is refused beside the console, not
	// in the global banner; the next good run clears it
	b.do(step, "exec an unterminated quote", fill("exec-argv", "echo 'oops"), chromedp.Click(chromedp.ID("exec-run")),
		chromedp.WaitVisible(chromedp.ID("exec-error")))
	if text := eval[string](b, `document.getElementById('exec-error').textContent`); !strings.Contains(text, "unterminated single quote") {
		t.Fatalf("the console's error says %q", text)
	}
	b.besideItsForm("exec-error", "exec-form")
	b.do(step, "exec a good command again", fill("exec-argv", "true"), chromedp.Click(chromedp.ID("exec-run")),
		chromedp.WaitNotVisible(chromedp.ID("exec-error")))

	b.do(step, "fetch the logs", chromedp.Click(chromedp.ID("logs-fetch")), chromedp.WaitVisible(chromedp.ID("logs-output")))
	b.do(step, "extend", fill("extend-ttl", "900"), chromedp.Click(chromedp.ID("extend-submit")))
	b.waitTrue(step, "the new expiry", `document.getElementById('extend-status').textContent.startsWith('expires ')`)
	return id
}

func destroy(t *testing.T, b *tab, g *gateway, id string) {
	t.Helper()
	row := fmt.Sprintf(`#sandboxes-table tr[data-id=%q]`, id)
	b.do(step, "destroy",
		chromedp.Click(chromedp.CSS(row+" button.destroy"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
	)
	b.waitTrue(step, "the row to go", fmt.Sprintf(`!document.querySelector('%s[data-state="running"]')`, row))
	if status, sb := g.call(t, http.MethodGet, "/v1/sandboxes/"+id, g.operator, nil); status != http.StatusOK || sb["state"] != "ended" {
		t.Fatalf("after destroy the gateway says %d %v, want ended", status, sb["state"])
	}
}

// policyRefusal: a create the policy refuses shows its code, rule ids and
// decision beside the create form, not in the global banner.
func policyRefusal(t *testing.T, b *tab) {
	t.Helper()
	b.do(step, "create above the per-sandbox memory maximum",
		fill("create-memory", "999999"),
		chromedp.Click(chromedp.ID("create-submit")),
		chromedp.WaitVisible(chromedp.ID("create-error")),
		fill("create-memory", ""),
	)
	text := eval[string](b, `document.getElementById('create-error').textContent`)
	if !strings.Contains(text, "policy_denied (HTTP 403)") || !strings.Contains(text, "rule ids: ") || !strings.Contains(text, "decision: ") {
		t.Fatalf("the refusal is shown as %q, want its code, rule ids and decision", text)
	}
	b.besideItsForm("create-error", "create-form")
	t.Logf("screenshot of a refused create: %s", b.screenshot("create-refused.png"))
}

func decisionsView(t *testing.T, b *tab) {
	t.Helper()
	b.do(step, "open the decisions view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="decisions"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#decisions-table tr[data-allow]`)),
		fill("decisions-limit", "500"),
	)
	// the refused create above left a denial with its rule ids
	b.waitTrue(step, "a denial with its rule ids", `!!document.querySelector('#decisions-table tr[data-allow="false"] code.rule')`)
	first := eval[string](b, `document.getElementById('decisions-updated').textContent`)
	b.waitTrue(10*time.Second, "the auto-refresh", fmt.Sprintf(`document.getElementById('decisions-updated').textContent !== %s`, jsString(first)))

	// one click shows the denials only, asked of the gateway (allow=false),
	// each with its violation messages and its decision id
	b.do(step, "show denials only", chromedp.Click(chromedp.CSS(`label:has(#decisions-result-denied)`), chromedp.NodeVisible))
	b.waitTrue(step, "only denials", `(() => {
  const rows = [...document.querySelectorAll('#decisions-table tbody tr')];
  return rows.length > 0 && rows.every((r) => r.dataset.allow === 'false');
})()`)
	got := eval[string](b, `JSON.stringify({
  asked: performance.getEntriesByType('resource').some((e) => e.name.includes('/v1/decisions?allow=false&limit=500')),
  rows: [...document.querySelectorAll('#decisions-table tbody tr')].map((r) => ({
    id: r.querySelector('code.decision-id')?.textContent === r.dataset.decision && /^[0-9a-f]{16,}$/.test(r.dataset.decision),
    selectAll: getComputedStyle(r.querySelector('code.decision-id')).userSelect === 'all',
    message: [...r.querySelectorAll('.violation')].some((v) => v.querySelector('code.rule').textContent !== '' && v.querySelector('.msg')?.textContent.length > 3),
  })),
})`)
	var r struct {
		Asked bool `json:"asked"`
		Rows  []struct {
			ID, SelectAll, Message bool
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Asked {
		t.Fatalf("the denied-only filter was not passed to GET /v1/decisions: %s", got)
	}
	for i, row := range r.Rows {
		if !row.ID || !row.SelectAll || !row.Message {
			t.Fatalf("denial %d lacks its decision id (selectable) or its message: %s", i, got)
		}
	}
	if msg := eval[string](b, `document.querySelector('#decisions-table tbody tr .violation[data-rule="B2"] .msg')?.textContent || ''`); !strings.Contains(msg, "memory_mb") {
		t.Fatalf("the refused create's B2 denial says %q, want its message", msg)
	}
	t.Logf("screenshot of the denials: %s", b.screenshot("decisions-denied.png"))

	// the entrypoint and rule filters narrow it further (B2 is decided at authz)
	b.do(step, "filter authz denials of rule B2", fill("decisions-entrypoint", "authz"), fill("decisions-rule", "b2"),
		chromedp.Click(chromedp.ID("decisions-apply")))
	b.waitTrue(step, "authz B2 denials only", `(() => {
  const rows = [...document.querySelectorAll('#decisions-table tbody tr')];
  return rows.length > 0 && rows.every((r) => r.dataset.allow === 'false' && r.dataset.entrypoint === 'authz' && r.querySelector('.violation[data-rule="B2"]'));
})() && performance.getEntriesByType('resource').some((e) => e.name.includes('allow=false&entrypoint=authz&rule=B2'))`)

	// a filter the gateway would refuse is refused beside the form
	b.do(step, "filter on a bad rule id", fill("decisions-rule", "not a rule!"), chromedp.Click(chromedp.ID("decisions-apply")),
		chromedp.WaitVisible(chromedp.ID("decisions-error")))
	if text := eval[string](b, `document.getElementById('decisions-error').textContent`); !strings.Contains(text, "rule must be a rule id") {
		t.Fatalf("the filter's error says %q", text)
	}
	b.besideItsForm("decisions-error", "decisions-filter")
	b.do(step, "clear the filters", chromedp.Click(chromedp.ID("decisions-clear")), chromedp.WaitNotVisible(chromedp.ID("decisions-error")))
	b.waitTrue(step, "allows again", `!!document.querySelector('#decisions-table tbody tr[data-allow="true"]')`)
	t.Logf("screenshot of all decisions: %s", b.screenshot("decisions-all.png"))
}
