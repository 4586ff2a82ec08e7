package browser_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browsers are the executables the tests look for, in order.
var browsers = []string{"chromium", "chromium-browser", "google-chrome"}

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skipf("no Chromium on PATH (looked for %s): install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser tests", strings.Join(browsers, ", "))
	return ""
}

// watchdog is injected into every document before the page's own scripts
// (DevTools scripts are not subject to the page's CSP): it counts CSP
// violations and unhandled promise rejections, which the page's own
// handler would otherwise hide.
const watchdog = `(() => {
  window.__test = { csp: [], rejections: [] };
  document.addEventListener('securitypolicyviolation', (e) => window.__test.csp.push(e.violatedDirective + ' ' + e.blockedURI));
  window.addEventListener('unhandledrejection', (e) => window.__test.rejections.push(String(e.reason && e.reason.message || e.reason)));
})();`

// tab is one browser tab and what it logged.
type tab struct {
	t   *testing.T
	ctx context.Context

	// artifacts is t.ArtifactDir(): a temp dir like t.TempDir(), kept
	// when the test runs with -artifacts (go test -artifacts -outputdir DIR).
	artifacts string

	mu      sync.Mutex
	console []string
}

// newTab starts a headless Chromium with one tab. Everything it does is
// bounded by limit. On a failure the test's cleanup saves a screenshot and
// the console log into the test's artifact dir and logs their paths.
func newTab(t *testing.T, limit time.Duration) *tab {
	t.Helper()
	exe := chromiumPath(t)
	parent, cancelAll := context.WithTimeout(context.Background(), limit)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	tb := &tab{t: t, ctx: ctx, artifacts: t.ArtifactDir()}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelAll()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", exe, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.console = append(tb.console, fmt.Sprintf("%s %s:%d %s", m.Time.Format(time.RFC3339Nano), m.URL, m.Line+1, m))
			tb.mu.Unlock()
		}
	}()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchdog}); err != nil {
		t.Fatalf("inject the watchdog: %v", err)
	}
	t.Cleanup(tb.saveOnFailure) // runs before the cancels above
	return tb
}

func (b *tab) saveOnFailure() {
	if !b.t.Failed() {
		return
	}
	dir := b.artifacts
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		p := filepath.Join(dir, "failure.png")
		if err := os.WriteFile(p, png, 0o600); err == nil {
			b.t.Logf("failure screenshot: %s", p)
		}
	} else {
		b.t.Logf("no failure screenshot: %v", err)
	}
	b.mu.Lock()
	log := strings.Join(b.console, "\n")
	b.mu.Unlock()
	p := filepath.Join(dir, "console.log")
	if err := os.WriteFile(p, []byte(log+"\n"), 0o600); err == nil {
		b.t.Logf("console log: %s (%d lines)", p, strings.Count(log, "\n")+1)
	}
}

// do runs actions within d, failing the test with what on error.
func (b *tab) do(d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its value.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitTrue waits until a JavaScript expression is true. (chromedp.Poll
// compiles its predicate with new Function, which the page's CSP refuses,
// so the loop runs here.)
func (b *tab) waitTrue(d time.Duration, what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("waiting %s for %s (%s): %v", d, what, expr, errors.Join(err, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// paste types text into the focused element the way a paste does
// (Input.insertText), not key by key.
func paste(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(sel), chromedp.NodeVisible),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
			return err
		}),
	)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a Go string always marshals
	}
	return string(b)
}

// secretGone checks a secret appears nowhere in the page: not in the
// serialized DOM, not in any form control's value, not in the URL.
func (b *tab) secretGone(what, secret string) {
	b.t.Helper()
	if len(secret) < 16 {
		b.t.Fatalf("%s: %q is too short to be a secret", what, secret)
	}
	where := eval[[]string](b, fmt.Sprintf(`(() => {
  const s = %s, found = [];
  if (document.documentElement.outerHTML.includes(s)) found.push('outerHTML');
  if (document.documentElement.textContent.includes(s)) found.push('textContent');
  for (const e of document.querySelectorAll('input, textarea, select, output')) {
    if (String(e.value).includes(s)) found.push('value of #' + (e.id || e.tagName));
  }
  if (location.href.includes(s)) found.push('URL');
  return found;
})()`, jsString(secret)))
	if len(where) > 0 {
		b.t.Fatalf("%s: the secret is still in the page: %v", what, where)
	}
}

// storageEmpty checks nothing went to localStorage, sessionStorage or cookies.
func (b *tab) storageEmpty(what string) {
	b.t.Helper()
	got := eval[string](b, `JSON.stringify({local: localStorage.length, session: sessionStorage.length, cookie: document.cookie})`)
	if got != `{"local":0,"session":0,"cookie":""}` {
		b.t.Fatalf("%s: browser storage is not empty: %s", what, got)
	}
}

// clean checks the page broke no CSP rule and left no rejection unhandled.
func (b *tab) clean() {
	b.t.Helper()
	got := eval[string](b, `JSON.stringify(window.__test)`)
	if got != `{"csp":[],"rejections":[]}` {
		b.t.Fatalf("the page broke its CSP or left a promise rejection unhandled: %s", got)
	}
}

// screenshot saves a full-page screenshot into the artifact dir.
func (b *tab) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(b.artifacts, name)
	if err := os.WriteFile(p, png, 0o600); err != nil {
		b.t.Fatal(err)
	}
	return p
}

// fill sets a form control's value by id, as typing would (input and
// change events). chromedp.SetValue cannot set an empty value.
func fill(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
  const e = document.getElementById(%s);
  e.value = %s;
  e.dispatchEvent(new Event('input', {bubbles: true}));
  e.dispatchEvent(new Event('change', {bubbles: true}));
})()`, jsString(id), jsString(value)))
}

// cellsStayCells checks every cell of a table's body is laid out as a
// table cell (a td made a flex box breaks the row's borders) and that the
// row buttons sit in a flex wrapper inside their cell.
func (b *tab) cellsStayCells(table string) {
	b.t.Helper()
	got := eval[string](b, fmt.Sprintf(`(() => {
  const cells = [...document.querySelectorAll('#%s tbody td')];
  const wrong = cells.filter((td) => getComputedStyle(td).display !== 'table-cell').map((td) => td.className || td.textContent.slice(0, 20));
  const wrappers = [...document.querySelectorAll('#%[1]s tbody td.actions-cell > .actions')];
  return JSON.stringify({cells: cells.length, wrong, actions: wrappers.length, flex: wrappers.every((d) => getComputedStyle(d).display === 'flex')});
})()`, table))
	var r struct {
		Cells   int      `json:"cells"`
		Wrong   []string `json:"wrong"`
		Actions int      `json:"actions"`
		Flex    bool     `json:"flex"`
	}
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		b.t.Fatalf("#%s cells: %v (%s)", table, err, got)
	}
	if r.Cells == 0 || r.Actions == 0 || len(r.Wrong) > 0 || !r.Flex {
		b.t.Fatalf("#%s: every td must be display: table-cell, its buttons in a flex wrapper: %s", table, got)
	}
}

// besideItsForm checks an error box is shown inside or right after its
// form, and that the global error banner stayed hidden.
func (b *tab) besideItsForm(box, form string) {
	b.t.Helper()
	got := eval[string](b, fmt.Sprintf(`(() => {
  const box = document.getElementById(%s), form = document.getElementById(%s);
  const placed = form.contains(box) || form.nextElementSibling === box;
  const r = box.getBoundingClientRect();
  return JSON.stringify({placed, visible: !box.hidden && r.height > 0, banner: !document.getElementById('error').hidden});
})()`, jsString(box), jsString(form)))
	if got != `{"placed":true,"visible":true,"banner":false}` {
		b.t.Fatalf("the error #%s is not shown beside #%s (and only there): %s", box, form, got)
	}
}
