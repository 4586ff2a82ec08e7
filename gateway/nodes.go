package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"sandgate/gateway/wire"
	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// nodeCache keeps Nomad's node list and server members for a short while:
// a burst of creates costs one listing, not one per request.
type nodeCache struct {
	nomad Nomad
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	nodes   []nomad.Node
	servers []nomad.ServerMember
	fetched time.Time
	// flight is the listing in progress, shared by every caller that
	// arrives while it runs; nil when none runs.
	flight *nodeFetch
}

// nodeFetch is one listing of the nodes and the server members; done is
// closed once its fields are set.
type nodeFetch struct {
	done    chan struct{}
	nodes   []nomad.Node
	servers []nomad.ServerMember
	err     error
}

func newNodeCache(n Nomad, ttl time.Duration, now func() time.Time) *nodeCache {
	return &nodeCache{nomad: n, ttl: ttl, now: now}
}

// list returns the client nodes and the server members. Both are read
// together: the control-plane verdict of a node needs both, and an error
// on either refuses (no node is judged without its server facts).
//
// Callers that find the cache stale while a listing runs wait for that one
// listing (its answer or its error) instead of queueing behind it for one
// of their own, and each stops waiting when its ctx ends: a Nomad slower
// than the per-call timeout costs every caller one timeout, not one per
// caller ahead of it.
//
// A caller that joined a listing started before it arrived, and saw that
// listing fail, tries once more with a listing of its own: the failure may
// predate it (a Nomad that has recovered since must not fail it).
func (c *nodeCache) list(ctx context.Context) ([]nomad.Node, []nomad.ServerMember, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		if c.nodes != nil && c.now().Sub(c.fetched) < c.ttl {
			nodes, servers := c.nodes, c.servers
			c.mu.Unlock()
			return nodes, servers, nil
		}
		f, joined := c.flight, c.flight != nil
		if f == nil {
			f = &nodeFetch{done: make(chan struct{})}
			c.flight = f
			// The listing outlives a caller that gives up; the client's
			// per-call timeout bounds it.
			go c.fetch(context.WithoutCancel(ctx), f)
		}
		c.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil && joined && attempt == 0 {
				continue
			}
			return f.nodes, f.servers, f.err
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// fetch lists the nodes and the server members into f and, unless the
// cache was invalidated meanwhile, keeps a successful answer.
func (c *nodeCache) fetch(ctx context.Context, f *nodeFetch) {
	defer close(f.done)
	f.nodes, f.err = c.nomad.Nodes(ctx)
	if f.err == nil {
		f.servers, f.err = c.nomad.Servers(ctx)
	}
	if f.err != nil {
		f.nodes, f.servers = nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flight != f {
		return
	}
	c.flight = nil
	if f.err == nil {
		c.nodes, c.servers, c.fetched = f.nodes, f.servers, c.now()
	}
}

// invalidate drops the cache: the next read asks Nomad (after an operator
// changed a node, the answer must not be two seconds old).
func (c *nodeCache) invalidate() {
	c.mu.Lock()
	c.nodes, c.servers, c.flight = nil, nil, nil
	c.mu.Unlock()
}

// byName returns the node called name and whether it runs a Nomad server.
func (c *nodeCache) byName(ctx context.Context, name string) (nomad.Node, bool, bool, error) {
	nodes, servers, err := c.list(ctx)
	if err != nil {
		return nomad.Node{}, false, false, err
	}
	for _, n := range nodes {
		if n.Name == name {
			return n, nomad.Colocated(n, servers), true, nil
		}
	}
	return nomad.Node{}, false, false, nil
}

// candidate is a node a create may go to.
type candidate struct {
	node nomad.Node
	// controlPlane: a Nomad server runs on the node (P2 refuses it).
	controlPlane bool
	record       *store.Node
	used         store.Usage
	limits       policies.BudgetLimits // the budget's, clamped to the node's allocatable
	// full: no enrolled node had room at the pick; this is the least
	// loaded of them, for the policy to refuse with its own B1 decision.
	full bool
}

// pickNode returns the node a create goes to. With a name, that node (the
// policy then judges it, so an unsuitable node is denied with its rule id,
// not silently replaced). Without one, the least loaded enrolled, active,
// schedulable node that runs no Nomad server and still has room for
// cpu/mem and is not in exclude (nodes an earlier attempt of the same
// create found full); if none has room, the least loaded of them marked
// full (the admission policy then refuses it, B1); if none is enrolled at
// all, a 409.
func (s *Server) pickNode(ctx context.Context, name string, cpu, mem int64, exclude []string) (candidate, error) {
	if name != "" {
		n, cp, ok, err := s.nodes.byName(ctx, name)
		if err != nil {
			return candidate{}, nomadUnavailable("could not read Nomad's nodes; nothing was changed", err)
		}
		if !ok {
			return candidate{}, invalid("node", "no Nomad client node is named %q", name)
		}
		rec, err := s.nodeRecord(ctx, name)
		if err != nil {
			return candidate{}, err
		}
		return candidate{node: n, controlPlane: cp, record: rec}, nil
	}
	nodes, servers, err := s.nodes.list(ctx)
	if err != nil {
		return candidate{}, nomadUnavailable("could not read Nomad's nodes; nothing was changed", err)
	}
	def := s.cfg.Engine.Settings().NodeBudgetDefault
	var best, leastFull *candidate
	enrolled := 0
	// why says, per node passed over, why: the 409 names them all, so an
	// operator pointed at a single `nomad agent -dev` learns that its only
	// node is a control plane.
	var why []string
	for _, n := range nodes {
		if slices.Contains(exclude, n.Name) {
			enrolled++ // picked before and filled since by a concurrent create
			continue
		}
		rec, err := s.nodeRecord(ctx, n.Name)
		if err != nil {
			return candidate{}, err
		}
		// A control plane (an old record enrolled before the hosts decision
		// refused it, or none): never picked; named explicitly, P2 refuses it.
		if nomad.Colocated(n, servers) {
			why = append(why, n.Name+": runs a Nomad server, a control plane (P2)")
			continue
		}
		if rec == nil || rec.Enrollment == "" || rec.Enrollment == "none" {
			why = append(why, n.Name+": not enrolled")
			continue
		}
		if (rec.State != "" && rec.State != "active") || n.Status != "ready" || n.Eligibility != "eligible" || n.Drain {
			why = append(why, fmt.Sprintf("%s: operator state %q, Nomad status %s, %s, drain %t", n.Name, rec.State, n.Status, n.Eligibility, n.Drain))
			continue
		}
		enrolled++
		used, err := s.cfg.Store.NodeUsage(ctx, n.Name)
		if err != nil {
			return candidate{}, fmt.Errorf("store: node usage %s: %w", n.Name, err)
		}
		lim := nodefacts.Limits(rec, def, nodefacts.AllocatableRoom(n))
		if used.Sandboxes+1 > lim.MaxSandboxes || used.CPUMHz+cpu > lim.CPUMHz || used.MemoryMB+mem > lim.MemoryMB {
			if leastFull == nil || load(used, lim) < load(leastFull.used, leastFull.limits) {
				leastFull = &candidate{node: n, record: rec, used: used, limits: lim, full: true}
			}
			continue
		}
		if best == nil || load(used, lim) < load(best.used, best.limits) {
			best = &candidate{node: n, record: rec, used: used, limits: lim}
		}
	}
	switch {
	case best != nil:
		return *best, nil
	case enrolled == 0:
		return candidate{}, newProblem(http.StatusConflict, wire.CodeNoEnrolledNode, noNodeDetail(why))
	case leastFull != nil:
		// The refusal is the policy's (B1, with its decision), not this
		// function's guess from the same figures.
		return *leastFull, nil
	}
	// Only nodes an earlier attempt found full are left.
	p := newProblem(http.StatusTooManyRequests, wire.CodeBudgetExhausted, "every enrolled node is at its budget; retry when a sandbox ends")
	p.RuleIDs = []string{"B1"}
	p.RetryAfter = 30 * time.Second
	return candidate{}, p
}

// noNodeDetail explains a 409 no_enrolled_node with the nodes passed over.
func noNodeDetail(why []string) string {
	const most = 10
	msg := "no enrolled, active and schedulable worker node; enroll one or name a node"
	switch {
	case len(why) == 0:
		return msg + " (Nomad lists no client node)"
	case len(why) > most:
		why = append(why[:most:most], fmt.Sprintf("and %d more", len(why)-most))
	}
	return msg + ". Passed over: " + strings.Join(why, "; ")
}

// load is the fullest budget dimension of a node, in [0, 1].
func load(u store.Usage, l policies.BudgetLimits) float64 {
	ratio := func(a, b int64) float64 {
		if b <= 0 {
			return 1
		}
		return float64(a) / float64(b)
	}
	return slices.Max([]float64{ratio(u.Sandboxes, l.MaxSandboxes), ratio(u.CPUMHz, l.CPUMHz), ratio(u.MemoryMB, l.MemoryMB)})
}

func (s *Server) nodeRecord(ctx context.Context, name string) (*store.Node, error) {
	rec, err := s.cfg.Store.GetNode(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: node %s: %w", name, err)
	}
	return &rec, nil
}
