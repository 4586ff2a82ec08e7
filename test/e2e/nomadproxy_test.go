package e2e

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyFault is what the proxy does to the requests it matches.
type proxyFault struct {
	Method     string // "" matches every method
	PathPrefix string // "" matches every path
	// Latency delays the request before it is forwarded.
	Latency time.Duration
	// Status answers the request with this status and Body, unforwarded.
	Status int
	Body   string
	// Drop closes the connection without forwarding the request or
	// answering it.
	Drop bool
	// LoseAnswer forwards the request (Nomad applies it), then closes the
	// connection instead of answering.
	LoseAnswer bool
	// Before runs when the fault matches, after Latency and before the
	// request is forwarded or answered: the cluster changes at that
	// moment (another job takes the node's room just as a sandbox's job is
	// registered).
	Before func()
}

func (f proxyFault) matches(r *http.Request) bool {
	return (f.Method == "" || r.Method == f.Method) && strings.HasPrefix(r.URL.Path, f.PathPrefix)
}

// nomadProxy stands between one test's gateway and the suite's real Nomad
// server: the gateway's nomad.address. It forwards HTTP and the exec
// WebSocket as they are, except what an injected fault changes, and it can
// cut every open connection (a stream broken mid-exec).
type nomadProxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu     sync.Mutex
	faults []proxyFault
	// afterAnswer runs once, as the first answer Nomad gave to a request
	// it matches passes back to the gateway.
	afterAnswer *proxyHook
	conns       map[net.Conn]struct{} // open, hijacked ones included
}

type proxyHook struct {
	match func(*http.Request, *http.Response) bool
	run   func()
}

func newNomadProxy(t testing.TB, target string) *nomadProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &nomadProxy{conns: map[net.Conn]struct{}{}}
	p.rp = httputil.NewSingleHostReverseProxy(u)
	p.rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		h := p.afterAnswer
		if h != nil && h.match(resp.Request, resp) {
			p.afterAnswer = nil
		} else {
			h = nil
		}
		p.mu.Unlock()
		if h != nil {
			h.run()
		}
		return nil
	}
	p.rp.ErrorLog = log.New(io.Discard, "", 0) // a cut stream is the point, not news
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch st {
		case http.StateNew:
			p.conns[c] = struct{}{}
		case http.StateClosed:
			delete(p.conns, c)
		}
	}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

func (p *nomadProxy) url() string { return p.srv.URL }

// inject replaces the proxy's faults.
func (p *nomadProxy) inject(f ...proxyFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

func (p *nomadProxy) clear() { p.inject() }

// after runs fn once, when the first answer matching match passes.
func (p *nomadProxy) after(match func(*http.Request, *http.Response) bool, fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.afterAnswer = &proxyHook{match: match, run: fn}
}

// cut closes every open connection, the exec WebSockets too; new ones are
// served as before.
func (p *nomadProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *nomadProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	var f *proxyFault
	for i := range p.faults {
		if p.faults[i].matches(r) {
			f = &p.faults[i]
			break
		}
	}
	var fault proxyFault
	if f != nil {
		fault = *f
	}
	p.mu.Unlock()
	if f == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	if fault.Latency > 0 {
		select {
		case <-time.After(fault.Latency):
		case <-r.Context().Done():
			return
		}
	}
	if fault.Before != nil {
		fault.Before()
	}
	switch {
	case fault.Drop:
		panic(http.ErrAbortHandler) // net/http closes the connection unanswered
	case fault.LoseAnswer:
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
		panic(http.ErrAbortHandler)
	case fault.Status != 0:
		http.Error(w, fault.Body, fault.Status)
	default:
		p.rp.ServeHTTP(w, r)
	}
}
