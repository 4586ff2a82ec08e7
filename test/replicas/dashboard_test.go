package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandgate/gateway/client"
	"sandgate/internal/pgtest"
)

// roundRobin is a load balancer in front of a deployment: each request
// goes to the next replica in turn, the Host header kept as an operator's
// proxy keeps it. It counts the API requests each replica answered and
// remembers any 5xx.
type roundRobin struct {
	next     atomic.Uint64
	backends []*httputil.ReverseProxy
	names    []string

	mu       sync.Mutex
	answered map[string]int // replica name -> /v1/ requests answered
	failures []string
}

func newRoundRobin(t *testing.T, d *deployment) *httptest.Server {
	lb := &roundRobin{answered: map[string]int{}}
	for _, r := range d.replicas {
		target, err := url.Parse(r.url)
		if err != nil {
			t.Fatal(err)
		}
		name := r.name
		lb.names = append(lb.names, name)
		lb.backends = append(lb.backends, &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = pr.In.Host
				pr.SetXForwarded()
			},
			ModifyResponse: func(resp *http.Response) error {
				lb.mu.Lock()
				defer lb.mu.Unlock()
				if strings.HasPrefix(resp.Request.URL.Path, "/v1/") {
					lb.answered[name]++
				}
				if resp.StatusCode >= 500 {
					lb.failures = append(lb.failures, fmt.Sprintf("%s %s through %s: %d", resp.Request.Method, resp.Request.URL.Path, name, resp.StatusCode))
				}
				return nil
			},
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		i := lb.next.Add(1) % uint64(len(lb.backends))
		lb.backends[i].ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		srv.Close()
		lb.mu.Lock()
		defer lb.mu.Unlock()
		t.Logf("API requests answered through the load balancer: %v", lb.answered)
	})
	t.Cleanup(func() {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		if len(lb.failures) > 0 {
			t.Errorf("the load balancer passed on server errors: %v", lb.failures)
		}
		for _, n := range lb.names {
			if lb.answered[n] == 0 {
				t.Errorf("%s answered no API request of the dashboard: %v", n, lb.answered)
			}
		}
	})
	return srv
}

// TestTheDashboardWorksThroughALoadBalancer: an operator drives the
// dashboard in a real browser through a round-robin proxy in front of two
// replicas. Every view reads whichever replica the proxy picks, so each
// must answer for the whole deployment: a sandbox made through one
// replica is listed and runs its console through the other, and the
// decisions view shows a refusal decided on either.
func TestTheDashboardWorksThroughALoadBalancer(t *testing.T) {
	t.Parallel()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Skip("no Chromium on PATH: install Debian's chromium (apt-get install -y chromium) to run the dashboard through a load balancer")
	}
	d := newDeployment(t, pgtest.Database(t), 2)
	ctx := context.Background()
	r1, r2 := d.replicas[0], d.replicas[1]

	// A sandbox made through replica-2 and a refusal decided on replica-1,
	// before the browser exists.
	sb, err := r2.client(t, d.operator).CreateSandbox(ctx, client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r1.client(t, sb.Token).Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"-rf"}})
	var p *client.Problem
	if !errors.As(err, &p) || p.DecisionID == "" {
		t.Fatalf("exec of -rf through %s: %v, want a refusal with a decision id", r1.name, err)
	}
	refused := p.DecisionID

	lb := newRoundRobin(t, d)

	parent, cancelAll := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancelAll()
	alloc, cancelAlloc := chromedp.NewExecAllocator(parent, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	// Start the browser on the tab's own context: started on a step's
	// shorter context, it would close when that step ends.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// waitTrue polls here: chromedp.Poll compiles with new Function, which
	// the dashboard's CSP refuses.
	waitTrue := func(what, expr string) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		for {
			ok, err := chromedp.Run(c, chromedp.Evaluate[bool](expr))
			if err == nil && ok {
				return
			}
			select {
			case <-c.Done():
				banner, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`))
				t.Fatalf("waiting for %s (%s): %v; the page's error banner: %q", what, expr, errors.Join(err, c.Err()), banner)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	do("open the dashboard through the load balancer", chromedp.Navigate(lb.URL+"/"))
	waitTrue("capability detection", `document.body.classList.contains('ready') && document.getElementById('upgrade-banner').hidden`)
	do("sign in",
		chromedp.WaitEnabled(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), d.operator),
		chromedp.Click(chromedp.ID("sign-in-button")),
		chromedp.WaitVisible(chromedp.ID("view-overview")))
	do("open the sandboxes view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="sandboxes"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("view-sandboxes")))
	row := fmt.Sprintf(`#sandboxes-table tr[data-id=%q]`, sb.ID)
	waitTrue("the sandbox made through "+r2.name+" listed as running", fmt.Sprintf(`!!document.querySelector('%s[data-state="running"]')`, row))

	// The console: every command is a request the proxy may send to
	// either replica.
	do("open the console",
		chromedp.Click(chromedp.CSS(row+" button.open"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("sandbox-panel")))
	for i := range 4 {
		word := fmt.Sprintf("through-the-balancer-%d", i)
		do("run echo "+word,
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById('exec-argv').value = %q`, "echo "+word)),
			chromedp.Click(chromedp.ID("exec-run"), chromedp.NodeVisible))
		waitTrue("its output", fmt.Sprintf(`document.getElementById('exec-stdout').textContent === %q`, word+"\n"))
	}

	do("open the decisions view",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="decisions"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#decisions-table tr[data-allow]`)))
	// The background passes decide every second (a reclaim decision per
	// node), so the newest 50 soon hold none of the refusals: an operator
	// looks at the refusals alone.
	do("show the refusals only",
		chromedp.Click(chromedp.ID("decisions-result-denied"), chromedp.NodeVisible))
	waitTrue("the refusals only", `document.querySelectorAll('#decisions-table tr[data-allow]').length > 0 && !document.querySelector('#decisions-table tr[data-allow="true"]')`)
	// The view refreshes every few seconds, each refresh through the next
	// replica: the refusal decided on replica-1 must stay in every answer.
	shown := fmt.Sprintf(`!!document.querySelector('#decisions-table tr[data-decision=%q][data-allow="false"]')`, refused)
	for range 3 {
		waitTrue("the refusal decided on "+r1.name, shown)
		first, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('decisions-updated').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		waitTrue("the next refresh", fmt.Sprintf(`document.getElementById('decisions-updated').textContent !== %q`, first))
	}
	waitTrue("the refusal after the last refresh", shown)
	if banner, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`)); err != nil || banner != "" {
		t.Fatalf("the dashboard shows an error through the load balancer: %q %v", banner, err)
	}
}
