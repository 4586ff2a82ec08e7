// Package dashboard serves sandgate's operator dashboard: plain HTML, CSS
// and JavaScript embedded in the binary, with no build step. The pages call
// the REST API with the token the user pastes (an operator's, an agent's or
// a reviewer's: the page offers the views its scopes open); the token
// lives in the page's memory only.
//
// Every answer carries a strict Content-Security-Policy (scripts, styles and
// connections from this origin only, no framing, no forms posting anywhere),
// so the page cannot load or run anything it does not embed. Only the files
// embedded under static/ are served, by exact name: no directory listing,
// no index redirects, 404 for everything else.
package dashboard

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy is the policy every dashboard answer carries.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// contentTypes are the file types the dashboard may serve; a file of any
// other type is not served at all.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// asset is one embedded file, read once.
type asset struct {
	name        string
	contentType string
	data        []byte
}

// loadAssets reads the flat static/ directory: regular files of a known
// type only; subdirectories and other files are not served.
func loadAssets() (map[string]asset, error) {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		return nil, err
	}
	out := make(map[string]asset, len(entries))
	for _, e := range entries {
		ct, ok := contentTypes[path.Ext(e.Name())]
		if !e.Type().IsRegular() || !ok {
			continue
		}
		data, err := fs.ReadFile(static, "static/"+e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = asset{name: e.Name(), contentType: ct, data: data}
	}
	return out, nil
}

var assets = sync.OnceValues(loadAssets)

// Handler serves the dashboard: GET / is the page (static/index.html),
// GET /ui/<file> its assets. Anything else is a 404.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, "index.html")
	})
	mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, r.PathValue("file"))
	})
	return securityHeaders(mux)
}

// securityHeaders sets the headers every answer carries, 404s included.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
		// no-store on every answer, as on every answer of the gateway
		// (docs/api.md, Caching): one rule with no exception to
		// remember; a gateway upgrade is picked up on the next load.
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// serve writes one embedded file by exact name, or a plain 404.
func serve(w http.ResponseWriter, r *http.Request, name string) {
	all, err := assets()
	if err != nil {
		http.Error(w, "dashboard assets unavailable", http.StatusInternalServerError)
		return
	}
	a, ok := all[name]
	if !ok || strings.ContainsAny(name, "/\\") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.data))
}
