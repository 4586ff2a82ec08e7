package dashboard_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"sandgate/gateway/dashboard"
)

// answer is what the handler wrote.
type answer struct {
	StatusCode int
	Header     http.Header
	body       string
}

func get(h http.Handler, method, target string) answer {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return answer{rec.Code, rec.Header(), rec.Body.String()}
}

func TestTheHandlerServesThePageAndItsAssets(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler()
	for _, tc := range []struct {
		name, target, contentType, cache, contains string
	}{
		{"the root is the page, never cached", "/", "text/html; charset=utf-8", "no-store", `<script type="module" src="/ui/app.js">`},
		{"the entry script is JavaScript", "/ui/app.js", "text/javascript; charset=utf-8", "no-store", "/v1/capabilities"},
		{"a module is JavaScript", "/ui/argv.js", "text/javascript; charset=utf-8", "no-store", "export function parseArgv"},
		{"the style sheet is CSS", "/ui/style.css", "text/css; charset=utf-8", "no-store", ".banner.simulated"},
		{"the page is never cached by any name", "/ui/index.html", "text/html; charset=utf-8", "no-store", "gateway-info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := get(h, http.MethodGet, tc.target)
			b := r.body
			if r.StatusCode != http.StatusOK {
				t.Fatalf("status %d", r.StatusCode)
			}
			if got := r.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := r.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if !strings.Contains(b, tc.contains) {
				t.Errorf("the body lacks %q", tc.contains)
			}
		})
	}
}

func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
	}
	for _, target := range []string{"/", "/ui/app.js", "/ui/style.css", "/ui/missing.js", "/ui/", "/nope"} {
		r := get(h, http.MethodGet, target)
		for k, v := range want {
			if got := r.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", target, k, got, v)
			}
		}
	}
}

func TestUnknownFilesAndDirectoriesAreNotFound(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler()
	for _, tc := range []struct{ name, target string }{
		{"an unknown file", "/ui/missing.js"},
		{"the asset directory itself (no listing)", "/ui/"},
		{"the asset prefix without a slash", "/ui"},
		{"the embedded directory by its own name", "/ui/static"},
		{"a nested path", "/ui/static/app.js"},
		{"an escaped traversal", "/ui/..%2fdashboard.go"},
		{"a Go source file beside the assets", "/ui/dashboard.go"},
		{"a path outside /ui", "/app.js"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := get(h, http.MethodGet, tc.target)
			b := r.body
			// a clean-path redirect from the mux is fine; what it must never
			// do is answer with content
			if r.StatusCode != http.StatusNotFound && r.StatusCode != http.StatusMovedPermanently {
				t.Fatalf("status %d, want 404: %.200s", r.StatusCode, b)
			}
			if strings.Contains(b, "<a href") || strings.Contains(b, "package dashboard") {
				t.Fatalf("the answer leaks a listing or a source file: %.200s", b)
			}
		})
	}
}

func TestOnlyGetAndHeadAreServed(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler()
	if r := get(h, http.MethodHead, "/ui/app.js"); r.StatusCode != http.StatusOK {
		t.Errorf("HEAD: %d", r.StatusCode)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		r := get(h, m, "/")
		if r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /: %d, want 405", m, r.StatusCode)
		}
	}
}

// The page obeys its own CSP: no inline script, no inline style, no
// inline event handler, nothing loaded from another origin.
func TestThePageHasNothingInlineAndNothingExternal(t *testing.T) {
	t.Parallel()
	page := get(dashboard.Handler(), http.MethodGet, "/").body
	for _, tc := range []struct {
		name string
		re   *regexp.Regexp
	}{
		{"an inline script", regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`)},
		{"a script without src", regexp.MustCompile(`(?i)<script(?:(?:\s(?:type|defer|async)="?[^"\s>]*"?)*)>`)},
		{"a style element", regexp.MustCompile(`(?i)<style`)},
		{"a style attribute", regexp.MustCompile(`(?i)\sstyle=`)},
		{"an inline event handler", regexp.MustCompile(`(?i)\son[a-z]+=`)},
		{"an external resource", regexp.MustCompile(`(?i)(src|href)="(https?:)?//`)},
		{"a javascript: URL", regexp.MustCompile(`(?i)javascript:`)},
	} {
		if loc := tc.re.FindStringIndex(page); loc != nil {
			t.Errorf("the page holds %s: %q", tc.name, page[loc[0]:min(len(page), loc[1]+40)])
		}
	}
}

// The scripts never write HTML from strings, nor touch browser storage or
// cookies: API data only reaches the DOM as text, the token only memory.
func TestTheScriptsNeverWriteHTMLNorUseStorage(t *testing.T) {
	t.Parallel()
	forbidden := regexp.MustCompile(`innerHTML|outerHTML\s*=|insertAdjacentHTML|document\.write|localStorage|sessionStorage|document\.cookie|\beval\(|new Function|setAttribute\(\s*['"]style|\.src\s*=`)
	scripts := 0
	static := os.DirFS("static")
	err := fs.WalkDir(static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".js") {
			return err
		}
		scripts++
		data, err := fs.ReadFile(static, name)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			if m := forbidden.FindString(line); m != "" {
				t.Errorf("%s:%d uses %s", name, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scripts < 5 {
		t.Fatalf("only %d scripts found", scripts)
	}
}

var (
	htmlID = regexp.MustCompile(`\sid="([^"]+)"`)
	byID   = regexp.MustCompile(`byId\('([a-z0-9-]+)'\)`)
)

// Every id of the page is unique (the overview's section and its figure
// once shared one, and the figure's text replaced the whole section), and
// every element a script asks for by a literal id is in the page.
func TestThePageIDsAreUniqueAndTheScriptsFindTheirs(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, m := range htmlID.FindAllStringSubmatch(string(page), -1) {
		ids[m[1]]++
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("id %q is used %d times in index.html", id, n)
		}
	}
	scripts, err := fs.Glob(os.DirFS("static"), "*.js")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no script: %v", err)
	}
	for _, name := range scripts {
		src, err := os.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range byID.FindAllStringSubmatch(string(src), -1) {
			if ids[m[1]] == 0 {
				t.Errorf("%s asks for #%s, which index.html lacks", name, m[1])
			}
		}
	}
}
