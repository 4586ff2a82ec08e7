package browser_test

import (
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/chromedp/chromedp"
)

// sandboxFields: a sandbox's row and panel show its image, CPU, memory,
// labels (as text, markup included) and lifetime ceiling.
func sandboxFields(t *testing.T, b *tab, g *gateway) {
	t.Helper()
	status, sb := g.call(t, http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{
		"ttl_seconds": 600, "cpu_mhz": 250, "memory_mb": 128,
		"labels": map[string]string{"team": "ci", "purpose": "<b>demo</b>"},
	})
	id, _ := sb["id"].(string)
	image, _ := sb["image"].(string)
	ceiling, _ := sb["ceiling_at"].(string)
	if status != http.StatusCreated || id == "" || image == "" || ceiling == "" {
		t.Fatalf("create a labelled sandbox: %d %v", status, sb)
	}
	b.do(step, "open the sandboxes view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="sandboxes"]`)),
		chromedp.WaitVisible(chromedp.ID("view-sandboxes")),
		chromedp.Click(chromedp.ID("sandboxes-refresh")))
	row := fmt.Sprintf(`#sandboxes-table tr[data-id=%q]`, id)
	b.waitTrue(step, "the labelled sandbox's row", fmt.Sprintf(`!!document.querySelector('%s')`, row))
	got := eval[string](b, fmt.Sprintf(`(() => {
  const r = document.querySelector('%s'), cell = (c) => r.querySelector('td.' + c) || r.querySelector('td .' + c);
  return JSON.stringify({image: cell('image').textContent, cpu: cell('cpu').textContent, memory: cell('memory').textContent,
    labels: [...cell('labels').querySelectorAll('code.label')].map((e) => e.textContent), ceiling: cell('ceiling').title,
    ceilingText: cell('ceiling').textContent});
})()`, row))
	want := fmt.Sprintf(`{"image":%s,"cpu":"250 MHz","memory":"128 MB","labels":["purpose=<b>demo</b>","team=ci"],"ceiling":%s,`, jsString(image), jsString(ceiling))
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(want) + `"ceilingText":"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in \d+ (s|min|h)\)"\}$`).MatchString(got) {
		t.Fatalf("the row shows %s\nwant %s\"ceilingText\":\"<time> (in ...)\"}", got, want)
	}
	if eval[bool](b, `!!document.querySelector('#sandboxes-table b')`) {
		t.Fatal("a label was parsed as HTML")
	}
	b.cellsStayCells("sandboxes-table")

	b.do(step, "open its panel", chromedp.Click(chromedp.CSS(row+" button.open"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("sandbox-panel")))
	panel := eval[string](b, `JSON.stringify(Object.fromEntries([...document.querySelectorAll('#panel-details dd')].map((d) => [d.dataset.field, d.textContent])))`)
	wantPanel := fmt.Sprintf(`"image":%s,"cpu":"250 MHz","memory":"128 MB","labels":"purpose=<b>demo</b>team=ci"`, jsString(image))
	if !regexp.MustCompile(regexp.QuoteMeta(wantPanel) + `,.*"ceiling":"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"\}$`).MatchString(panel) {
		t.Fatalf("the panel shows %s\nwant %s ... and the ceiling", panel, wantPanel)
	}
	t.Logf("screenshot of the sandboxes view: %s", b.screenshot("sandboxes.png"))
	b.do(step, "close the panel", chromedp.Click(chromedp.ID("panel-close")))
	if status, _ := g.call(t, http.MethodDelete, "/v1/sandboxes/"+id, g.operator, nil); status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("destroy the labelled sandbox: %d", status)
	}
}
