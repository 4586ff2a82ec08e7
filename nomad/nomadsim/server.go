package nomadsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// Server is a simulated Nomad agent (server and client in one) together with
// the cluster state it serves. The zero value is not usable; call New.
type Server struct {
	cfg     Config
	handler http.Handler

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines the simulator started itself

	// mu guards everything below it.
	mu         sync.Mutex
	closed     bool
	index      uint64
	addr       string
	nodes      []*simNode
	jobs       map[string]*simJob
	evals      map[string]*api.Evaluation
	allocs     map[string]*simAlloc
	allocOrder []string
	vars       map[string]*api.Variable
	procs      map[*execProc]struct{}
	conns      map[*websocket.Conn]struct{}
	httpSrv    *http.Server
	taskDirs   map[string]simDir // alloc id -> simulated alloc directory (fs.go)

	reqs requestLog
	flt  faultSet
}

// New builds a simulator for cfg. It returns an error when cfg is invalid
// (no nodes, duplicate or empty node names, unknown status values).
func New(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:    c,
		ctx:    ctx,
		cancel: cancel,
		jobs:   map[string]*simJob{},
		evals:  map[string]*api.Evaluation{},
		allocs: map[string]*simAlloc{},
		vars:   map[string]*api.Variable{},
		procs:  map[*execProc]struct{}{},
		conns:  map[*websocket.Conn]struct{}{},
	}
	s.index = 1
	now := time.Now()
	for i, nc := range c.Nodes {
		if nc.Address == "" {
			nc.Address = fmt.Sprintf("192.0.2.%d", 10+i)
		}
		s.nodes = append(s.nodes, s.buildNode(nc, now))
	}
	s.handler = s.reqs.middleware(s.flt.middleware(s.ctx, s.routes()))
	return s, nil
}

// Handler returns the HTTP handler that serves the simulated API. Node
// HTTPAddr values point nowhere until SetAddress (or Start) is called; the
// nomad/api client then falls back to the address it was configured with.
func (s *Server) Handler() http.Handler { return s.handler }

// Start serves the API on ln in a background goroutine and points every
// node's HTTPAddr at ln's address. Close stops it.
func (s *Server) Start(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.httpSrv = srv
	s.mu.Unlock()
	s.SetAddress(ln.Addr().String())
	if !s.spawn(func() { _ = srv.Serve(ln) }) {
		_ = ln.Close()
	}
}

// SetAddress sets the "host:port" every node advertises as its HTTPAddr.
// nomad/api's exec and log calls connect to that address first, so it must
// be the simulator's own listener.
func (s *Server) SetAddress(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr = addr
	for _, n := range s.nodes {
		n.n.HTTPAddr = addr
		n.n.Attributes["nomad.advertise.address"] = addr
	}
}

// Close stops the server started by Start, ends every exec session and log
// stream, kills every simulated command and stops all timers. It waits for
// the goroutines the simulator started and is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, a := range s.allocs {
		a.shutdown()
	}
	for _, n := range s.nodes {
		if n.drainTimer != nil {
			n.drainTimer.Stop()
		}
	}
	conns := make([]*websocket.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	srv := s.httpSrv
	s.mu.Unlock()

	s.cancel()
	for _, c := range conns {
		_ = c.Close()
	}
	if srv != nil {
		_ = srv.Close()
	}
	s.wg.Wait()
}

// spawn runs fn in a goroutine that Close waits for. It reports false, and
// does not run fn, once the server is closed.
func (s *Server) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spawnLocked(fn)
}

func (s *Server) spawnLocked(fn func()) bool {
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// nextIndexLocked advances and returns the raft-like modify index.
func (s *Server) nextIndexLocked() uint64 {
	s.index++
	return s.index
}

// routes dispatches by path the way Nomad's agent does: a prefix per
// resource, then a suffix per sub-resource.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/agent/self", s.get(s.handleAgentSelf))
	mux.HandleFunc("/v1/agent/members", s.get(s.handleAgentMembers))
	mux.HandleFunc("/v1/status/leader", s.get(s.handleStatusLeader))
	mux.HandleFunc("/v1/status/peers", s.get(s.handleStatusPeers))
	mux.HandleFunc("/v1/regions", s.get(s.handleRegions))
	mux.HandleFunc("/v1/nodes", s.get(s.handleNodes))
	mux.HandleFunc("/v1/node/", s.handleNode)
	mux.HandleFunc("/v1/client/stats", s.get(s.handleClientStats))
	mux.HandleFunc("/v1/client/allocation/", s.handleClientAllocation)
	mux.HandleFunc("/v1/client/fs/logs/", s.get(s.handleLogs))
	mux.HandleFunc("/v1/client/fs/ls/", s.get(s.handleFSList))
	mux.HandleFunc("/v1/jobs", s.handleJobs)
	mux.HandleFunc("/v1/job/", s.handleJob)
	mux.HandleFunc("/v1/validate/job", s.handleValidate)
	mux.HandleFunc("/v1/evaluations", s.get(s.handleEvaluations))
	mux.HandleFunc("/v1/evaluation/", s.get(s.handleEvaluation))
	mux.HandleFunc("/v1/allocations", s.get(s.handleAllocations))
	mux.HandleFunc("/v1/allocation/", s.get(s.handleAllocation))
	mux.HandleFunc("/v1/vars", s.get(s.handleVars))
	mux.HandleFunc("/v1/var/", s.handleVar)
	return mux
}

// get wraps a read-only handler: any other method is Nomad's 405.
func (s *Server) get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writeError(w, r, http.StatusMethodNotAllowed, errInvalidMethod)
			return
		}
		h(w, r)
	}
}

// errInvalidMethod is Nomad's text for a method a route does not serve.
const errInvalidMethod = "Invalid method"

// pathTail returns the unescaped rest of the request path after prefix.
func pathTail(r *http.Request, prefix string) string {
	return strings.TrimPrefix(r.URL.Path, prefix)
}

// errClosed is returned by operations attempted after Close.
var errClosed = errors.New("nomadsim: server closed")
