package browser_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandgate/gateway/dashboard"
)

// oldGateway serves the dashboard beside a /v1/capabilities of an older
// gateway, and records every API path the page asks for.
type oldGateway struct {
	mu    sync.Mutex
	paths []string
}

func (o *oldGateway) handler(capabilities func(http.ResponseWriter)) http.Handler {
	ui := dashboard.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/"):
			ui.ServeHTTP(w, r)
			return
		case r.URL.Path == "/favicon.ico":
			http.NotFound(w, r)
			return
		}
		o.mu.Lock()
		o.paths = append(o.paths, r.Method+" "+r.URL.Path)
		o.mu.Unlock()
		if r.URL.Path == "/v1/capabilities" && capabilities != nil {
			capabilities(w)
			return
		}
		http.NotFound(w, r)
	})
}

func (o *oldGateway) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.paths...)
}

func answer(status int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// A gateway that lacks a capability the dashboard needs gets a visible
// "gateway upgrade required" and a dashboard whose every control is
// disabled: nothing can be sent to it, not even a sign-in.
func TestAnOlderGatewayGetsUpgradeRequiredAndNoControls(t *testing.T) {
	chromiumPath(t)
	for _, tc := range []struct {
		name         string
		capabilities func(http.ResponseWriter)
		missing      []string
	}{
		{
			"a gateway with sandboxes.v1 only",
			answer(http.StatusOK, `{"capabilities":["sandboxes.v1"],"version":"0.1","bundle_revision":"r0","simulated":false}`),
			[]string{"sandboxes.exec.v1", "hosts.v1", "tokens.v1", "decisions.v1"},
		},
		{
			"a gateway without /v1/capabilities",
			nil,
			[]string{"sandboxes.v1", "sandboxes.exec.v1", "hosts.v1", "tokens.v1", "decisions.v1"},
		},
		{
			"a gateway answering something else than JSON",
			answer(http.StatusOK, `<html>hello</html>`),
			[]string{"sandboxes.v1", "hosts.v1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := &oldGateway{}
			srv := httptest.NewServer(old.handler(tc.capabilities))
			defer srv.Close()
			b := newTab(t, 30*time.Second)
			b.do(step, "open the dashboard", chromedp.Navigate(srv.URL+"/"))
			b.waitTrue(step, "capability detection", `document.body.classList.contains('ready')`)

			banner := eval[string](b, `(() => { const e = document.getElementById('upgrade-banner'); return e.hidden || e.offsetHeight === 0 ? '' : e.textContent; })()`)
			if !strings.Contains(banner, "gateway upgrade required") {
				t.Fatalf("no visible upgrade banner: %q", banner)
			}
			for _, c := range tc.missing {
				if !strings.Contains(banner, c) {
					t.Errorf("the banner does not name %s: %q", c, banner)
				}
			}
			enabled := eval[[]string](b, `[...document.querySelectorAll('button, input, select, textarea, fieldset')].filter((e) => !e.disabled).map((e) => e.id || e.tagName)`)
			if len(enabled) > 0 {
				t.Fatalf("controls left enabled: %v", enabled)
			}
			if n := eval[int](b, `document.querySelectorAll('button, input, select, textarea').length`); n < 20 {
				t.Fatalf("only %d controls on the page: the check above proves little", n)
			}

			// a sign-in attempt goes nowhere
			b.do(step, "try to sign in",
				chromedp.Click(chromedp.ID("sign-in-button")),
				chromedp.Evaluate[chromedp.Void](`document.getElementById('sign-in-form').requestSubmit()`),
			)
			b.clean()
			for _, p := range old.seen() {
				if p != "GET /v1/capabilities" {
					t.Fatalf("the locked dashboard called the gateway: %v", old.seen())
				}
			}
			if len(old.seen()) == 0 {
				t.Fatal("the dashboard never asked for /v1/capabilities")
			}
		})
	}
}
