package browser_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandgate/test/testbin"
)

// live is the bound of a wait on a refresh the page makes by itself: the
// sandboxes and hosts refresh every 5 s, the overview every 10 s.
const live = 40 * time.Second

// What a newcomer met (issue 21, section 4), in a real browser: an
// operator lands on an overview whose figures are the API's; hosts and
// sandboxes refresh without a reload and without losing the console; a
// refused exec replaces the previous result; the sandbox filters narrow
// the list through the API; an ended sandbox offers no console; node
// names never break at their hyphens; an agent token sees only the views
// it may use, and is never served a 403. Screenshots at 1400 and 1024 px
// go to the test's artifact dir (go test -artifacts -outputdir DIR).
func TestTheDashboardFitsTheTokenAndStaysLive(t *testing.T) {
	chromiumPath(t)
	bin := testbin.Build(t)
	g := startGateway(t, bin)
	b := newTab(t, 300*time.Second)

	red := g.create(t, g.operator, map[string]any{"node": "worker-1", "ttl_seconds": 600, "labels": map[string]string{"team": "red"}})
	blue := g.create(t, g.operator, map[string]any{"node": "worker-2", "ttl_seconds": 600, "labels": map[string]string{"team": "blue"}})
	if status, _ := g.call(t, http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{"memory_mb": 999999}); status != http.StatusForbidden {
		t.Fatalf("a create above the memory maximum: %d, want a denial (403)", status)
	}

	b.do(step, "open the dashboard", chromedp.Navigate(g.url+"/"))
	b.waitTrue(step, "capability detection", `document.body.classList.contains('ready')`)
	// the tests read the page's requests from its resource timings: keep them all
	eval[bool](b, `(performance.setResourceTimingBufferSize(1000000), true)`)
	b.do(step, "sign in as the operator",
		chromedp.WaitEnabled(chromedp.ID("token-input")),
		paste("#token-input", g.operator),
		chromedp.Click(chromedp.ID("sign-in-button")),
		chromedp.WaitVisible(chromedp.ID("view-overview")))
	if got := b.navViews(); !slices.Equal(got, []string{"overview", "hosts", "sandboxes", "tokens", "decisions", "policy"}) {
		t.Fatalf("the operator's views: %v", got)
	}
	overviewMatchesTheAPI(t, b, g)
	b.shots("overview")

	hostsRefreshLive(t, b, g)
	sandboxesRefreshLive(t, b, g, red)
	refusalClearsTheConsole(t, b)
	filtersUseTheAPI(t, b, g, red, blue)
	nodeNamesDoNotWrap(t, b)
	endedSandboxesHaveNoConsole(t, b, g, blue)
	agentSeesItsViewsOnly(t, b, g)
	b.clean()
}

// create makes a sandbox through the API and returns its id.
func (g *gateway) create(t *testing.T, tok string, body map[string]any) string {
	t.Helper()
	return g.api(t).Create(tok, body).ID
}

// list reads one listing of the API (a page of up to 1000).
func (g *gateway) list(t *testing.T, path, key string) []map[string]any {
	t.Helper()
	status, m := g.call(t, http.MethodGet, path, g.operator, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, status, m)
	}
	raw, _ := json.Marshal(m[key])
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("GET %s: %s is not a list: %v", path, key, err)
	}
	return out
}

// navViews are the views the navigation offers.
func (b *tab) navViews() []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll('#nav button')].filter((e) => !e.hidden).map((e) => e.dataset.view)`)
}

// shots saves a full-page screenshot at 1400 and at 1024 px wide, then
// goes back to 1400.
func (b *tab) shots(name string) {
	b.t.Helper()
	for _, w := range []int64{1400, 1024} {
		b.viewport(w)
		b.t.Logf("screenshot of %s at %d px: %s", name, w, b.screenshot(fmt.Sprintf("%s-%d.png", name, w)))
	}
	b.viewport(1400)
}

// viewport sets the page's width and waits for two frames, so the layout
// follows.
func (b *tab) viewport(w int64) {
	b.t.Helper()
	b.do(step, fmt.Sprintf("a %d px wide window", w), chromedp.EmulateViewport(w, 900))
	eval[bool](b, `new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
}

// overviewMatchesTheAPI: the overview's live sandboxes, cluster budget
// and denials of the last hour are the API's figures.
func overviewMatchesTheAPI(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	liveCount := len(g.list(t, "/v1/sandboxes?limit=1000", "sandboxes"))
	type sums struct {
		Hosts  int            `json:"hosts"`
		Used   map[string]int `json:"used"`
		Limits map[string]int `json:"limits"`
	}
	want := sums{Used: map[string]int{}, Limits: map[string]int{}}
	for _, h := range g.list(t, "/v1/hosts", "hosts") {
		if e, _ := h["enrollment"].(string); e == "" || e == "none" {
			continue
		}
		want.Hosts++
		budget, _ := h["budget"].(map[string]any)
		used, _ := budget["used"].(map[string]any)
		limits, _ := budget["limits"].(map[string]any)
		for _, k := range []string{"sandboxes", "cpu_mhz", "memory_mb"} {
			f, _ := used[k].(float64)
			want.Used[k] += int(f)
		}
		for _, k := range []string{"max_sandboxes", "cpu_mhz", "memory_mb"} {
			f, _ := limits[k].(float64)
			want.Limits[k] += int(f)
		}
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	denials := len(g.list(t, "/v1/decisions?allow=false&limit=1000&since="+url.QueryEscape(since), "decisions"))
	if liveCount < 2 || want.Hosts < 2 || want.Used["sandboxes"] < 2 || denials < 1 {
		t.Fatalf("the API's figures are too small to test: %d live, %+v, %d denials", liveCount, want, denials)
	}
	b.waitTrue(live, "the overview's figures to be the API's", fmt.Sprintf(`(() => {
  const v = (id) => document.getElementById(id).dataset.value;
  return v('overview-live-count') === %q && v('overview-denials-count') === %q && !!document.getElementById('overview-budget-bars').dataset.budget;
})()`, fmt.Sprint(liveCount), fmt.Sprint(denials)))
	var page sums
	if err := json.Unmarshal([]byte(eval[string](b, `document.getElementById('overview-budget-bars').dataset.budget`)), &page); err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, page) != mustJSON(t, want) {
		t.Fatalf("the overview's cluster budget is %s, the API's %s", mustJSON(t, page), mustJSON(t, want))
	}
	got := eval[[]string](b, `[...document.querySelectorAll('#overview-budget-bars .bar')].map((e) => e.dataset.kind + ' ' + e.querySelector('.bar-text').textContent)`)
	wantBars := []string{
		fmt.Sprintf("sandboxes sandboxes %d/%d", want.Used["sandboxes"], want.Limits["max_sandboxes"]),
		fmt.Sprintf("cpu cpu %d/%d MHz", want.Used["cpu_mhz"], want.Limits["cpu_mhz"]),
		fmt.Sprintf("memory-budget memory %d/%d MB", want.Used["memory_mb"], want.Limits["memory_mb"]),
	}
	if !slices.Equal(got, wantBars) {
		t.Fatalf("the budget bars say %q, want %q", got, wantBars)
	}
	if rule := eval[string](b, `document.querySelector('#overview-denials-rules li')?.dataset.key || ''`); rule == "" {
		t.Fatal("the overview names no rule of the denials")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hostsRefreshLive: a host's state changed through the API shows in the
// open hosts view without a reload.
func hostsRefreshLive(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	b.do(step, "open the hosts view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="hosts"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#hosts-table tr[data-node="worker-2"][data-state="active"]`)))
	eval[bool](b, `window.__notReloaded = true`)
	if status, _ := g.call(t, http.MethodPost, "/v1/hosts/worker-2/state", g.operator, map[string]any{"state": "frozen"}); status != http.StatusOK {
		t.Fatalf("freeze worker-2: %d", status)
	}
	b.waitTrue(live, "worker-2 frozen in the page", `!!document.querySelector('#hosts-table tr[data-node="worker-2"][data-state="frozen"]') && window.__notReloaded === true`)
	b.shots("hosts")
	if status, _ := g.call(t, http.MethodPost, "/v1/hosts/worker-2/state", g.operator, map[string]any{"state": "active"}); status != http.StatusOK {
		t.Fatalf("reactivate worker-2: %d", status)
	}
	b.waitTrue(live, "worker-2 active again", `!!document.querySelector('#hosts-table tr[data-node="worker-2"][data-state="active"]')`)
}

// sandboxesRefreshLive: a sandbox created through the API appears in the
// open sandboxes view without a reload, and the console open meanwhile
// keeps its command line and its result.
func sandboxesRefreshLive(t *testing.T, b *tab, g *gateway, red string) {
	t.Helper()
	row := fmt.Sprintf(`#sandboxes-table tr[data-id=%q]`, red)
	b.do(step, "open the console of the red sandbox",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="sandboxes"]`)),
		chromedp.Click(chromedp.CSS(row+" button.open"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("sandbox-panel")),
		fill("exec-argv", "echo hi"),
		chromedp.Click(chromedp.ID("exec-run")))
	b.waitTrue(step, "the first result", `document.getElementById('exec-stdout').textContent === 'hi\n'`)
	b.do(step, "type a command without running it", fill("exec-argv", "typed, not run"), chromedp.Focus(chromedp.ID("exec-argv")))
	green := g.create(t, g.operator, map[string]any{"node": "worker-1", "ttl_seconds": 600, "labels": map[string]string{"team": "red", "shade": "green"}})
	b.waitTrue(live, "the new sandbox in the page", fmt.Sprintf(`!!document.querySelector('#sandboxes-table tr[data-id=%q]') && window.__notReloaded === true`, green))
	got := eval[string](b, `JSON.stringify([document.getElementById('panel-id').textContent, document.getElementById('exec-argv').value,
  document.getElementById('exec-stdout').textContent, document.getElementById('exec-result').hidden, document.getElementById('sandbox-panel').hidden])`)
	if want := fmt.Sprintf(`[%q,"typed, not run","hi\n",false,false]`, red); got != want {
		t.Fatalf("the refresh disturbed the console: %s, want %s", got, want)
	}
}

// refusalClearsTheConsole: a refused exec replaces the previous result
// with the problem: its title, detail and rule ids.
func refusalClearsTheConsole(t *testing.T, b *tab) {
	t.Helper()
	b.do(step, "run a program named like an option (E1)",
		fill("exec-argv", "-x"),
		chromedp.Click(chromedp.ID("exec-run")),
		chromedp.WaitVisible(chromedp.ID("exec-error")))
	got := eval[string](b, `JSON.stringify({hidden: document.getElementById('exec-result').hidden,
  out: document.getElementById('exec-stdout').textContent + document.getElementById('exec-exit').textContent,
  error: document.getElementById('exec-error').textContent})`)
	var r struct {
		Hidden bool   `json:"hidden"`
		Out    string `json:"out"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Hidden || r.Out != "" {
		t.Fatalf("the previous result is still shown under the refusal: %s", got)
	}
	for _, part := range []string{"Denied by policy", "policy_denied (HTTP 403)", "rule ids: E1"} {
		if !strings.Contains(r.Error, part) {
			t.Fatalf("the refusal says %q, want %q in it", r.Error, part)
		}
	}
	b.besideItsForm("exec-error", "exec-form")
	b.do(step, "close the console", chromedp.Click(chromedp.ID("panel-close")))
}

// rowIDs are the ids of the sandbox rows shown (not hidden by the search).
func (b *tab) rowIDs() []string {
	b.t.Helper()
	ids := eval[[]string](b, `[...document.querySelectorAll('#sandboxes-table tbody tr')].filter((r) => !r.hidden).map((r) => r.dataset.id)`)
	slices.Sort(ids)
	return ids
}

func ids(list []map[string]any) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		id, _ := s["id"].(string)
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// filtersUseTheAPI: the label and node filters are the list's query
// parameters, and the search narrows the rows listed.
func filtersUseTheAPI(t *testing.T, b *tab, g *gateway, red, blue string) {
	t.Helper()
	for _, tc := range []struct {
		field, value, query, asked string
	}{
		{"sandboxes-label", "team=red", "label=team%3Dred", "/v1/sandboxes?label=team%3Dred"},
		{"sandboxes-node", "worker-2", "node=worker-2", "/v1/sandboxes?node=worker-2"},
	} {
		want := ids(g.list(t, "/v1/sandboxes?"+tc.query, "sandboxes"))
		if len(want) == 0 {
			t.Fatalf("the API lists no sandbox for %s", tc.query)
		}
		b.do(step, "filter on "+tc.value, fill("sandboxes-label", ""), fill("sandboxes-node", ""), fill(tc.field, tc.value),
			chromedp.Click(chromedp.ID("sandboxes-apply")))
		b.waitTrue(step, "the list the API gives for "+tc.query, fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#sandboxes-table tbody tr')].map((r) => r.dataset.id).sort()) === %s
  && performance.getEntriesByType('resource').some((e) => e.name.endsWith(%q))`, jsString(mustJSON(t, want)), tc.asked))
	}
	if got := b.rowIDs(); !slices.Equal(got, []string{blue}) {
		t.Fatalf("the node filter shows %v, want the blue sandbox %s", got, blue)
	}
	b.do(step, "clear the filters, then search", chromedp.Click(chromedp.ID("sandboxes-clear")), fill("sandboxes-search", "TEAM=red"))
	b.waitTrue(step, "every sandbox listed again", `document.querySelectorAll('#sandboxes-table tbody tr').length >= 3`)
	want := ids(g.list(t, "/v1/sandboxes?label=team%3Dred", "sandboxes"))
	b.waitTrue(step, "the search to show the red ones only", fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#sandboxes-table tbody tr')].filter((r) => !r.hidden).map((r) => r.dataset.id).sort()) === %s`, jsString(mustJSON(t, want))))
	if !slices.Contains(want, red) {
		t.Fatalf("the red sandbox %s is not among %v", red, want)
	}
	if count := eval[string](b, `document.getElementById('sandboxes-count').textContent`); !strings.HasPrefix(count, fmt.Sprintf("%d of ", len(want))) {
		t.Fatalf("the count says %q", count)
	}
	b.do(step, "filter on the label too", fill("sandboxes-label", "team=red"), chromedp.Click(chromedp.ID("sandboxes-apply")))
	b.waitTrue(step, "the red ones, asked of the API", `performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/v1/sandboxes?label=team%3Dred')).length >= 2`)
	b.shots("sandboxes-filtered")
	b.do(step, "clear the filters", chromedp.Click(chromedp.ID("sandboxes-clear")), fill("sandboxes-search", ""))
}

// nodeNamesDoNotWrap: at 1024 px, with every sandbox listed, no node name
// breaks at its hyphen, in the sandboxes and in the hosts.
func nodeNamesDoNotWrap(t *testing.T, b *tab) {
	t.Helper()
	b.viewport(1024)
	defer b.viewport(1400)
	const check = `(() => {
  const names = [...document.querySelectorAll('%s')];
  const broken = names.filter((e) => e.getClientRects().length !== 1 || e.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(e).lineHeight || '20'));
  return JSON.stringify({names: names.map((e) => e.textContent), broken: broken.map((e) => e.textContent + ' ' + e.getClientRects().length + ' ' + e.getBoundingClientRect().height)});
})()`
	b.do(step, "list every sandbox", chromedp.Click(chromedp.ID("sandboxes-all")))
	b.waitTrue(step, "the sandbox rows", `document.querySelectorAll('#sandboxes-table tbody tr').length >= 3`)
	for _, where := range []struct{ view, sel string }{
		{"sandboxes", "#sandboxes-table tbody td.node .node-name"},
		{"hosts", "#hosts-table tbody .node-name"},
	} {
		if where.view == "hosts" {
			b.do(step, "open the hosts view", chromedp.Click(chromedp.CSS(`#nav button[data-view="hosts"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#hosts-table tr[data-node]`)))
		}
		got := eval[string](b, fmt.Sprintf(check, where.sel))
		if !strings.Contains(got, "worker-1") || !strings.Contains(got, `"broken":[]`) {
			t.Fatalf("node names in the %s view at 1024 px: %s", where.view, got)
		}
	}
	b.do(step, "back to the sandboxes", chromedp.Click(chromedp.CSS(`#nav button[data-view="sandboxes"]`)),
		chromedp.WaitVisible(chromedp.ID("view-sandboxes")))
}

// endedSandboxesHaveNoConsole: an ended sandbox's row offers no Console,
// and a console open on a sandbox that ends loses its exec.
func endedSandboxesHaveNoConsole(t *testing.T, b *tab, g *gateway, blue string) {
	t.Helper()
	if status, _ := g.call(t, http.MethodDelete, "/v1/sandboxes/"+blue, g.operator, nil); status != http.StatusNoContent {
		t.Fatalf("destroy the blue sandbox: %d", status)
	}
	b.waitTrue(live, "the blue sandbox ended, without a console", fmt.Sprintf(`(() => {
  const r = document.querySelector('#sandboxes-table tr[data-id=%q]');
  return !!r && r.dataset.state === 'ended' && !r.querySelector('button.open');
})()`, blue))
	if bad := eval[[]string](b, `[...document.querySelectorAll('#sandboxes-table tbody tr')].filter((r) => !['starting', 'running'].includes(r.dataset.state) && r.querySelector('button.open, button.destroy')).map((r) => r.dataset.id)`); len(bad) > 0 {
		t.Fatalf("sandboxes that are not live still offer a console or destroy: %v", bad)
	}
	other := g.create(t, g.operator, map[string]any{"ttl_seconds": 600})
	row := fmt.Sprintf(`#sandboxes-table tr[data-id=%q]`, other)
	b.waitTrue(live, "the new sandbox running", fmt.Sprintf(`!!document.querySelector('%s[data-state="running"] button.open')`, row))
	b.do(step, "open its console", chromedp.Click(chromedp.CSS(row+" button.open"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("exec-form")))
	if status, _ := g.call(t, http.MethodDelete, "/v1/sandboxes/"+other, g.operator, nil); status != http.StatusNoContent {
		t.Fatalf("destroy: %d", status)
	}
	b.waitTrue(live, "the open console to lose its exec", `document.getElementById('exec-form').hidden && !document.getElementById('panel-ended').hidden
  && document.getElementById('sandbox-panel').dataset.state === 'ended'`)
	b.do(step, "close the console and list the live ones", chromedp.Click(chromedp.ID("panel-close")), chromedp.Click(chromedp.ID("sandboxes-all")))
}

// agentSeesItsViewsOnly: an agent token is offered the overview and its
// sandboxes, is never served a 403, and its console has no extend.
func agentSeesItsViewsOnly(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	status, tok := g.call(t, http.MethodPost, "/v1/tokens", g.operator, map[string]any{"role": "agent", "ttl_seconds": 600, "subject": "dash-agent", "label": "dashboard test"})
	agent, _ := tok["token"].(string)
	if status != http.StatusCreated || agent == "" {
		t.Fatalf("mint an agent token: %d %v", status, tok)
	}
	mine := g.create(t, agent, map[string]any{"ttl_seconds": 600, "labels": map[string]string{"team": "agents"}})
	b.do(step, "sign out, sign in as the agent",
		chromedp.Click(chromedp.ID("sign-out"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
		chromedp.Evaluate[chromedp.Void](`performance.clearResourceTimings()`),
		paste("#token-input", agent),
		chromedp.Click(chromedp.ID("sign-in-button")),
		chromedp.WaitVisible(chromedp.ID("view-overview")))
	if got := b.navViews(); !slices.Equal(got, []string{"overview", "sandboxes"}) {
		t.Fatalf("an agent token is offered %v, want the overview and the sandboxes", got)
	}
	b.waitTrue(live, "the agent's own live sandbox", `document.getElementById('overview-live-count').dataset.value === '1'`)
	if got := eval[string](b, `JSON.stringify(['overview-sandboxes', 'overview-budget', 'overview-denials'].map((id) => document.getElementById(id).hidden))`); got != `[false,true,true]` {
		t.Fatalf("the agent's overview sections hidden: %s, want only its sandboxes shown", got)
	}
	b.shots("agent-overview")
	b.do(step, "open its sandboxes", chromedp.Click(chromedp.CSS(`#nav button[data-view="sandboxes"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#sandboxes-table tr[data-id=%q] button.open`, mine))))
	if got := b.rowIDs(); !slices.Equal(got, []string{mine}) {
		t.Fatalf("the agent lists %v, want its own %s", got, mine)
	}
	if !eval[bool](b, `document.getElementById('sandboxes-principal-field').hidden`) {
		t.Fatal("the agent is offered the principal filter (operators only: an agent lists its own)")
	}
	b.do(step, "open its console", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sandboxes-table tr[data-id=%q] button.open`, mine))),
		chromedp.WaitVisible(chromedp.ID("exec-form")))
	if !eval[bool](b, `document.getElementById('extend-form').hidden && !document.getElementById('logs-form').hidden`) {
		t.Fatal("the agent's console offers extend (operators only) or lacks the logs")
	}
	b.shots("agent-sandboxes")
	if got := eval[[]string](b, `[...new Set(performance.getEntriesByType('resource').filter((e) => e.name.includes('/v1/') && e.responseStatus >= 400).map((e) => e.responseStatus + ' ' + new URL(e.name).pathname))]`); len(got) > 0 {
		t.Fatalf("the agent's dashboard was refused: %v", got)
	}
	if !eval[bool](b, `document.getElementById('error').hidden`) {
		t.Fatalf("the agent sees an error: %s", eval[string](b, `document.getElementById('error-text').textContent`))
	}
	if denials := g.list(t, "/v1/decisions?allow=false&principal=agent%3Adash-agent", "decisions"); len(denials) > 0 {
		t.Fatalf("the gateway denied the agent's dashboard %d times: %v", len(denials), denials[0])
	}
}
