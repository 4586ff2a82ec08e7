package browser_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The hosts view: rows, bars and their colours, state changes (draining
// asks first), enrollment with a budget, the control plane marked and
// offering no Enroll, a refused enrollment with its rule, and
// unenrollment that reclaims.
func hostsView(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	b.do(step, "open the hosts view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="hosts"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#hosts-table tr[data-node]`)),
	)
	got := eval[string](b, `JSON.stringify({
  rows: document.querySelectorAll('#hosts-table tr[data-node]').length,
  enrolled: document.querySelectorAll('#hosts-table tr[data-enrollment^="sandbox"]').length,
  usage: document.querySelectorAll('#hosts-table .bar[data-kind="memory"], #hosts-table .bar[data-kind="disk"]').length,
  budget: document.querySelectorAll('#hosts-table .bar[data-kind="sandboxes"]').length,
  states: document.querySelectorAll('#hosts-table select.host-state').length})`)
	// sandgate dev has two enrolled simulated workers and a control plane
	if !regexp.MustCompile(`^\{"rows":[3-9],"enrolled":[2-9],"usage":[1-9][0-9]*,"budget":[2-9],"states":[2-9]\}$`).MatchString(got) {
		t.Fatalf("the hosts view lacks rows, bars or state controls: %s", got)
	}
	b.cellsStayCells("hosts-table")

	// the bands' colours: the simulated nodes sit at 0 %, so the bars are
	// drawn here with the page's own module and style sheet
	colours := eval[string](b, `(async () => {
  const { bar, USAGE } = await import('/ui/bars.js');
  const out = [];
  for (const [pct, t] of [[50, USAGE.disk], [88, USAGE.disk], [93, USAGE.disk], [93, USAGE.memory], [97, USAGE.memory]]) {
    const e = bar('probe', 'probe', pct, t);
    document.body.append(e);
    const fill = e.querySelector('.fill');
    out.push(e.dataset.level + ' ' + getComputedStyle(fill).backgroundColor + ' ' + fill.style.width);
    e.remove();
  }
  return out.join(', ');
})()`)
	const ok, warn, crit = "rgb(46, 139, 87)", "rgb(211, 139, 0)", "rgb(198, 40, 40)"
	if want := "ok " + ok + " 50%, warn " + warn + " 88%, crit " + crit + " 93%, warn " + warn + " 93%, crit " + crit + " 97%"; colours != want {
		t.Fatalf("usage bars: %s\nwant %s", colours, want)
	}

	// the operator's state: frozen, then draining (asks first), then active
	for _, state := range []string{"frozen", "draining", "active"} {
		b.do(step, "set worker-2 "+state, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
  const s = document.querySelector('#hosts-table tr[data-node="worker-2"] select.host-state');
  s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true}));
})()`, state)))
		if state == "draining" {
			b.do(step, "confirm the drain", chromedp.WaitVisible(chromedp.ID("confirm-dialog")), chromedp.Click(chromedp.ID("confirm-ok")))
		}
		b.waitTrue(step, "worker-2 "+state, fmt.Sprintf(`!!document.querySelector('#hosts-table tr[data-node="worker-2"][data-state=%q]')`, state))
		if st := hostState(t, g, "worker-2"); st != state {
			t.Fatalf("the gateway says worker-2 is %q, want %q", st, state)
		}
	}

	// re-enroll worker-1 with a budget of 5 sandboxes and 4 GiB (within
	// the simulated node's 8 GiB, B1): its bars say so
	b.do(step, "re-enroll worker-1",
		chromedp.Click(chromedp.CSS(`#hosts-table tr[data-node="worker-1"] button.enroll`)),
		chromedp.WaitVisible(chromedp.ID("enroll-dialog")),
		fill("enroll-max", "5"),
		fill("enroll-memory", "4096"),
		chromedp.Click(chromedp.ID("enroll-submit")),
		chromedp.WaitNotVisible(chromedp.ID("enroll-dialog")),
	)
	b.waitTrue(step, "the new budget", `document.querySelector('#hosts-table tr[data-node="worker-1"] .bar[data-kind="sandboxes"]').textContent.includes('/5') &&
  document.querySelector('#hosts-table tr[data-node="worker-1"] .bar[data-kind="memory-budget"]').textContent.includes('/4096 MB')`)

	// the control plane is marked, says why, and offers no Enroll (P2
	// would refuse it)
	cp := eval[string](b, `JSON.stringify([...document.querySelectorAll('#hosts-table tr[data-control-plane="true"]')].map((tr) => ({
  node: tr.dataset.node,
  badge: tr.querySelector('.badge.control-plane')?.textContent,
  tooltip: tr.querySelector('.badge.control-plane')?.title,
  note: tr.querySelector('.cp-note')?.textContent,
  enroll: [...tr.querySelectorAll('button')].filter((e) => !e.disabled && /enroll/i.test(e.textContent) && !/unenroll/i.test(e.textContent)).length})))`)
	const why = "sandgate never places sandboxes on a Nomad server node (rule P2)"
	if want := `[{"node":"control-1","badge":"control plane","tooltip":"` + why + `","note":"Not enrollable: ` + why + `.","enroll":0}]`; cp != want {
		t.Fatalf("the control plane's row: %s\nwant %s", cp, want)
	}
	if n := eval[int](b, `document.querySelectorAll('#hosts-table tr[data-control-plane="false"] .badge.control-plane').length`); n != 0 {
		t.Fatalf("%d workers are marked as control planes", n)
	}

	// a refused enrollment shows its rule in the dialog, beside the form
	b.do(step, "re-enroll worker-1 with more memory than it has",
		chromedp.Click(chromedp.CSS(`#hosts-table tr[data-node="worker-1"] button.enroll`)),
		chromedp.WaitVisible(chromedp.ID("enroll-dialog")),
		fill("enroll-memory", "99999999"),
		chromedp.Click(chromedp.ID("enroll-submit")),
		chromedp.WaitVisible(chromedp.ID("enroll-error")),
	)
	if text := eval[string](b, `document.getElementById('enroll-error').textContent`); !strings.Contains(text, "rule ids: ") || !strings.Contains(text, "B1") {
		t.Fatalf("the refused enrollment shows %q, want rule B1", text)
	}
	if eval[bool](b, `!document.getElementById('error').hidden`) {
		t.Fatal("the refused enrollment also went to the global error banner")
	}
	b.do(step, "cancel", chromedp.Click(chromedp.ID("enroll-cancel")), chromedp.WaitNotVisible(chromedp.ID("enroll-dialog")))

	// unenroll worker-2, reclaiming its sandboxes (one runs there now)
	status, sb := g.call(t, http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{"node": "worker-2", "ttl_seconds": 600})
	id, _ := sb["id"].(string)
	if status != http.StatusCreated || id == "" {
		t.Fatalf("create on worker-2: %d %v", status, sb)
	}
	b.do(step, "refresh the hosts", chromedp.Click(chromedp.ID("hosts-refresh")))
	// The refresh re-renders the table: a node found before it can be gone
	// by the time it is clicked (a flake under load), so the button is
	// looked up and clicked in one step of the page's own, until the
	// confirmation opens.
	b.waitTrue(step, "the unenroll confirmation of worker-2", `(() => {
  const dlg = document.getElementById('confirm-option');
  if (dlg && dlg.offsetParent !== null) return true;
  const btn = document.querySelector('#hosts-table tr[data-node="worker-2"] button.unenroll');
  if (btn) btn.click();
  return false;
})()`)
	b.do(step, "confirm the unenroll",
		chromedp.Click(chromedp.ID("confirm-check")),
		chromedp.Click(chromedp.ID("confirm-ok")),
	)
	b.waitTrue(step, "worker-2 unenrolled", `!!document.querySelector('#hosts-table tr[data-node="worker-2"][data-enrollment="none"]')`)
	if text := eval[string](b, `document.getElementById('notice').textContent`); !strings.Contains(text, "reclaimed "+id) {
		t.Fatalf("the notice says %q, want the reclaimed %s", text, id)
	}
	if status, sb := g.call(t, http.MethodGet, "/v1/sandboxes/"+id, g.operator, nil); status != http.StatusOK || sb["state"] != "ended" {
		t.Fatalf("the reclaimed sandbox: %d %v", status, sb["state"])
	}
}

func hostState(t *testing.T, g *gateway, name string) string {
	t.Helper()
	status, body := g.call(t, http.MethodGet, "/v1/hosts", g.operator, nil)
	hosts, _ := body["hosts"].([]any)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/hosts: %d", status)
	}
	for _, h := range hosts {
		if m, _ := h.(map[string]any); m["name"] == name {
			st, _ := m["state"].(string)
			return st
		}
	}
	t.Fatalf("GET /v1/hosts lists no %s", name)
	return ""
}
