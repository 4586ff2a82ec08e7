package faults

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultyNomad serves the simulator, except that it can serve a request and
// then lose its answer (the connection closed instead), and can report
// every allocation of a job as pending although it runs.
type faultyNomad struct {
	next http.Handler
	mu   sync.Mutex
	lose []string // "METHOD /path-prefix"
	// pending reports every allocation as pending, its tasks not started.
	pending bool
}

// loseAnswers makes the requests of method whose path starts with prefix
// take effect and then get no answer.
func (f *faultyNomad) loseAnswers(method, prefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose = append(f.lose, method+" "+prefix)
}

// neverRun reports every allocation as pending from now on.
func (f *faultyNomad) neverRun() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = true
}

func (f *faultyNomad) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose, f.pending = nil, false
}

func (f *faultyNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	lose := slices.ContainsFunc(f.lose, func(m string) bool {
		method, prefix, _ := strings.Cut(m, " ")
		return r.Method == method && strings.HasPrefix(r.URL.Path, prefix)
	})
	pending := f.pending && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/job/") && strings.HasSuffix(r.URL.Path, "/allocations")
	f.mu.Unlock()
	switch {
	case lose:
		f.next.ServeHTTP(httptest.NewRecorder(), r)
		panic(http.ErrAbortHandler) // net/http closes the connection unanswered
	case pending:
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var allocs []map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(body, &allocs) == nil {
			for _, a := range allocs {
				if a["ClientStatus"] == "running" {
					a["ClientStatus"], a["ClientDescription"] = "pending", "No tasks have started"
				}
				states, _ := a["TaskStates"].(map[string]any)
				for _, ts := range states {
					if m, ok := ts.(map[string]any); ok && m["State"] == "running" {
						m["State"], m["StartedAt"] = "pending", nil
					}
				}
			}
			body, _ = json.Marshal(allocs)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = io.Copy(w, bytes.NewReader(body))
	default:
		f.next.ServeHTTP(w, r)
	}
}

// proxy forwards TCP connections to the simulator: the Nomad agent as the
// gateway reaches it. crash cuts every connection and closes new ones at
// once, until restart.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	// frozen holds every byte in flight, connections open: an agent that
	// goes silent.
	frozen atomic.Bool
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				for p.frozen.Load() {
					time.Sleep(10 * time.Millisecond)
				}
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = dst.Close()
			_ = src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// crash cuts every connection and refuses new ones. The cuts are not
// simultaneous: a request on a connection cut last may still be answered.
func (p *proxy) crash() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// cut cuts every connection and accepts new ones: a stream broken while
// the agent stays up.
func (p *proxy) cut() {
	p.crash()
	p.restart()
}

// freeze holds every byte in flight until thaw: the agent goes silent,
// its connections open.
func (p *proxy) freeze() { p.frozen.Store(true) }

func (p *proxy) thaw() { p.frozen.Store(false) }

// restart accepts connections again.
func (p *proxy) restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.crash()
	p.wg.Wait()
}
