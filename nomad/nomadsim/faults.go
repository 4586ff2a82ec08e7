package nomadsim

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is an injected failure for requests that match Method and
// PathPrefix. A matching request first waits Latency; then, if Drop is set,
// its connection is closed without a response; else, if Status is set, it
// gets that status with Body as a plain-text body; else it is served
// normally (a pure latency fault).
type Fault struct {
	// Method matches the request method; empty matches any.
	Method string
	// PathPrefix matches the start of the URL path (no query); empty matches
	// any path.
	PathPrefix string
	// Latency delays the request before anything else happens.
	Latency time.Duration
	// Status, when non-zero, replaces the response (for example 500).
	Status int
	// Body is the response body written with Status.
	Body string
	// Drop hijacks the connection and closes it without a response.
	Drop bool
	// Times is how many requests the fault applies to; 0 means forever.
	Times int
	// Before, when set, runs when the fault applies, after Latency and
	// before the request is answered or served: a test makes the cluster
	// change at that moment (another scheduler's job takes a node's room
	// just before a sandbox job is registered). It may call the simulator.
	Before func()
}

// InjectFault adds f. Faults are tried in the order they were injected and
// the first one that matches a request applies to it.
func (s *Server) InjectFault(f Fault) { s.flt.add(f) }

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.flt.clear() }

type faultSet struct {
	mu     sync.Mutex
	faults []*armedFault
}

type armedFault struct {
	f    Fault
	left int // remaining uses when f.Times > 0
}

func (fs *faultSet) add(f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = append(fs.faults, &armedFault{f: f, left: f.Times})
}

func (fs *faultSet) clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = nil
}

// take returns the first fault matching r and uses it up once.
func (fs *faultSet) take(r *http.Request) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, af := range fs.faults {
		if af.f.Method != "" && !strings.EqualFold(af.f.Method, r.Method) {
			continue
		}
		if !strings.HasPrefix(r.URL.Path, af.f.PathPrefix) {
			continue
		}
		if af.f.Times > 0 {
			af.left--
			if af.left <= 0 {
				fs.faults = append(fs.faults[:i:i], fs.faults[i+1:]...)
			}
		}
		return af.f, true
	}
	return Fault{}, false
}

func (fs *faultSet) middleware(ctx context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := fs.take(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if f.Latency > 0 {
			t := time.NewTimer(f.Latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if f.Before != nil {
			f.Before()
		}
		switch {
		case f.Drop:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler) // net/http closes the connection
		case f.Status != 0:
			writeError(w, r, f.Status, f.Body)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// requestLogCap bounds the request log (the counter is exact).
const requestLogCap = 10000

// requestLog counts requests and remembers "METHOD /path" for each.
type requestLog struct {
	n   atomic.Int64
	mu  sync.Mutex
	log []string
}

func (l *requestLog) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.n.Add(1)
		l.mu.Lock()
		if len(l.log) == requestLogCap {
			l.log = append(l.log[:0:0], l.log[requestLogCap/2:]...)
		}
		l.log = append(l.log, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// Requests returns how many HTTP requests (WebSocket upgrades included) the
// simulator has received since New or the last ResetRequests.
func (s *Server) Requests() int64 { return s.reqs.n.Load() }

// RequestLog returns a copy of the "METHOD /path" entries (no query),
// oldest first. Only the most recent entries are kept once there are ten
// thousand of them.
func (s *Server) RequestLog() []string {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	return append([]string(nil), s.reqs.log...)
}

// ResetRequests zeroes the request counter and empties the request log.
func (s *Server) ResetRequests() {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	s.reqs.n.Store(0)
	s.reqs.log = nil
}
