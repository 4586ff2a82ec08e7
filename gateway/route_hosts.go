package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/wire"
	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// Hosts: the operator's view of Nomad client nodes and the changes an
// operator makes to them. Every change is data.sandgate.hosts.decision
// (INPUT, P2, I5, B1, R2); a drain or an unenroll with reclaim=true
// destroys the node's sandboxes first (R2).

// principalConfig names enrollments made from the gateway's configuration
// at start.
const principalConfig = "system:config"

// The operator states of a node.
const (
	stateActive   = wire.HostActive
	stateDraining = wire.HostDraining
)

// enrollRequest is PUT /v1/hosts/{node}/enrollment.
type enrollRequest wire.EnrollRequest

func (r *enrollRequest) required() bool                   { return false }
func (r *enrollRequest) policyBody() policies.RequestBody { return policies.RequestBody{} }
func (r *enrollRequest) check(*Server) error              { return nil }

// stateRequest is POST /v1/hosts/{node}/state.
type stateRequest wire.HostStateRequest

func (r *stateRequest) required() bool                   { return true }
func (r *stateRequest) policyBody() policies.RequestBody { return policies.RequestBody{} }
func (r *stateRequest) check(*Server) error {
	if r.State == nil {
		return invalid("state", "is required: active, frozen, reserved or draining")
	}
	return nil
}

// host is everything known about one node.
type host struct {
	name         string
	node         *nomad.Node // nil: Nomad does not list it
	controlPlane bool
	record       *store.Node
	usage        *nomad.Usage
	used         store.Usage
	// capacity is the node's room (nil when unknown); allocErr why its
	// allocations could not be read.
	capacity *policies.NodeCapacity
	allocErr error
}

// readCapacity reads the allocations of h's node into h.capacity.
func (s *Server) readCapacity(ctx context.Context, h *host) {
	if h.node == nil {
		return
	}
	a, err := s.cfg.Nomad.NodeAllocated(ctx, h.node.ID)
	if err != nil {
		h.allocErr = err
		return
	}
	h.capacity = nodefacts.Capacity(*h.node, &a)
}

// readHost gathers one node: Nomad's view (fresh), its record, its usage
// when Nomad answers, and the budget in use.
func (s *Server) readHost(ctx context.Context, name string) (host, error) {
	h := host{name: name}
	s.nodes.invalidate()
	n, cp, ok, err := s.nodes.byName(ctx, name)
	if err != nil {
		return h, nomadUnavailable("could not read Nomad's nodes; nothing was changed", err)
	}
	if ok {
		h.node, h.controlPlane = &n, cp
		if u, err := s.cfg.Nomad.NodeUsage(ctx, n.ID); err == nil {
			h.usage = &u
		}
		s.readCapacity(ctx, &h)
	}
	if h.record, err = s.nodeRecord(ctx, name); err != nil {
		return h, unavailable("the node store could not be read; nothing was changed", err)
	}
	if h.used, err = s.cfg.Store.NodeUsage(ctx, name); err != nil {
		return h, unavailable("the node store could not be read; nothing was changed", err)
	}
	return h, nil
}

// hostView is one host as the API shows it (wire.Host).
func (s *Server) hostView(h host) wire.Host {
	v := wire.Host{
		Name: h.name, Enrollment: "none", State: stateActive,
		Nomad:         wire.HostNomad{Status: "missing"},
		Budget:        s.hostBudgets(h),
		LiveSandboxes: h.used.Sandboxes, ControlPlane: h.controlPlane,
	}
	if h.node != nil {
		n := h.node
		v.ID, v.Datacenter = n.ID, n.Datacenter
		v.Nomad = wire.HostNomad{Status: n.Status, Eligibility: n.Eligibility, Drain: n.Drain}
		v.OS, v.Architecture = n.Attributes["kernel.name"], n.Attributes["cpu.arch"]
		v.Isolation = n.Meta[s.cfg.Engine.Settings().Placement.EgressIsolation.MetaKey]
	}
	if h.record != nil {
		v.Enrollment, v.UpdatedAt = h.record.Enrollment, formatTime(h.record.UpdatedAt)
		if h.record.State != "" {
			v.State = h.record.State
		}
	}
	if h.usage != nil {
		v.Usage = &wire.HostUsage{MemoryPercent: h.usage.MemoryPercent, DiskPercent: h.usage.DiskPercent}
	}
	return v
}

// hostBudgets is a host's budget in force, its use and its room, saying
// which figures the room clamped.
func (s *Server) hostBudgets(h host) wire.HostBudget {
	def := s.cfg.Engine.Settings().NodeBudgetDefault
	b := wire.HostBudget{
		Limits: wire.BudgetLimits(nodefacts.Limits(h.record, def, nodefacts.Room(h.capacity))),
		Used:   wire.BudgetUsed(h.used), Capacity: capacityView(h.capacity),
	}
	asked := nodefacts.Limits(h.record, def, nil)
	if b.Limits.CPUMHz < asked.CPUMHz {
		b.Clamped = append(b.Clamped, "cpu_mhz")
	}
	if b.Limits.MemoryMB < asked.MemoryMB {
		b.Clamped = append(b.Clamped, "memory_mb")
	}
	return b
}

// capacityView is a node's room as the API shows it (nil when unknown).
func capacityView(c *policies.NodeCapacity) *wire.NodeCapacity {
	if c == nil {
		return nil
	}
	res := func(r policies.Resources) wire.Resources { return wire.Resources(r) }
	return &wire.NodeCapacity{Allocatable: res(c.Allocatable), Others: res(c.Others), Sandboxes: res(c.Sandboxes)}
}

// listHosts is GET /v1/hosts: every Nomad client node, and every enrolled
// node Nomad no longer lists (status "missing"), ordered by name.
func (s *Server) listHosts(c echo.Context) error {
	ctx := c.Request().Context()
	nodes, servers, err := s.nodes.list(ctx)
	if err != nil {
		return nomadUnavailable("could not read Nomad's nodes", err)
	}
	recs, err := s.cfg.Store.ListNodes(ctx)
	if err != nil {
		return unavailable("the node store could not be read", err)
	}
	byName := map[string]*store.Node{}
	for i := range recs {
		byName[recs[i].Name] = &recs[i]
	}
	var hosts []host
	for i := range nodes {
		n := &nodes[i]
		h := host{name: n.Name, node: n, controlPlane: nomad.Colocated(*n, servers), record: byName[n.Name]}
		delete(byName, n.Name)
		if u, err := s.cfg.Nomad.NodeUsage(ctx, n.ID); err == nil {
			h.usage = &u
		}
		s.readCapacity(ctx, &h)
		hosts = append(hosts, h)
	}
	for _, rec := range byName {
		hosts = append(hosts, host{name: rec.Name, record: rec})
	}
	out := wire.HostList{Hosts: make([]wire.Host, 0, len(hosts))}
	for _, h := range hosts {
		if h.used, err = s.cfg.Store.NodeUsage(ctx, h.name); err != nil {
			return unavailable("the node store could not be read", err)
		}
		out.Hosts = append(out.Hosts, s.hostView(h))
	}
	slices.SortFunc(out.Hosts, func(a, b wire.Host) int { return strings.Compare(a.Name, b.Name) })
	return c.JSON(http.StatusOK, out)
}

// EnrollRequest is one enrollment: a node, egress or not, and the budget
// figures given (max_sandboxes, cpu_mhz, memory_mb; an absent figure takes
// the policy's node_budget_default). The policy judges the figures as given
// (B1): one above what Nomad can allocate on the node is refused, while the
// default is clamped to it at every use (budgetLimits; the answer's
// budget.clamped says so).
type EnrollRequest struct {
	Node   string
	Egress bool
	Budget map[string]int64
}

// Enroll enrolls a node for sandboxes after the hosts decision allows it
// (P2, I5, B1). It is what PUT /v1/hosts/{node}/enrollment does, and what
// the gateway's configuration does at start (principal system:config).
func (s *Server) Enroll(ctx context.Context, req EnrollRequest) error {
	_, err := s.enroll(ctx, req, principalConfig, nil)
	return err
}

func (s *Server) enroll(ctx context.Context, req EnrollRequest, principal string, c echo.Context) (host, error) {
	h, err := s.readHost(ctx, req.Node)
	if err != nil {
		return h, err
	}
	if h.node == nil {
		return h, newProblem(http.StatusNotFound, wire.CodeHostNotFound, fmt.Sprintf("Nomad lists no client node named %q", req.Node))
	}
	if h.allocErr != nil {
		// B1 judges the budget against the node's room: without it, no enrollment.
		return h, nomadUnavailable("could not read the allocations of node "+req.Node+"; nothing was changed", h.allocErr)
	}
	egress := req.Egress
	in := &policies.HostsInput{
		Action: "enroll", Request: policies.HostsRequest{Egress: &egress, Budget: req.Budget},
	}
	if err := s.allowHosts(ctx, in, h, principal, c); err != nil {
		return h, err
	}
	rec := store.Node{Name: req.Node, Enrollment: "sandbox", State: stateActive,
		MaxSandboxes: req.Budget["max_sandboxes"], CPUMHz: req.Budget["cpu_mhz"], MemoryMB: req.Budget["memory_mb"],
		UpdatedAt: s.cfg.Now().UTC()}
	if req.Egress {
		rec.Enrollment = s.cfg.Engine.Settings().Placement.EgressEnrollment
	}
	if h.record != nil && h.record.State != "" {
		rec.State = h.record.State // re-enrolling changes the enrollment and budget, not the state
	}
	if err := s.cfg.Store.PutNode(ctx, rec); err != nil {
		return h, unavailable("the enrollment could not be stored; nothing was changed", err)
	}
	s.nodes.invalidate()
	s.log.Info("node enrolled", "node", req.Node, "enrollment", rec.Enrollment, "by", principal)
	h.record = &rec
	return h, nil
}

// allowHosts completes in with the node's facts and decides it; a deny is
// a 409 sandboxes_live for R2 alone, else a 403 with the rule ids.
func (s *Server) allowHosts(ctx context.Context, in *policies.HostsInput, h host, principal string, c echo.Context) error {
	in.Now = s.cfg.Now().Unix()
	in.LiveSandboxes = h.used.Sandboxes
	if h.node != nil {
		in.Node = nodefacts.Of(*h.node, h.controlPlane, h.record, h.usage)
		in.Node.Capacity = h.capacity
	} else {
		// A node Nomad no longer lists: its name and record only (enough to
		// unenroll or freeze it; enroll refuses it before this).
		in.Node = nodefacts.Of(nomad.Node{Name: h.name, Status: "missing"}, false, h.record, nil)
	}
	v, err := in.Value()
	if err != nil {
		return fmt.Errorf("hosts input: %w", err)
	}
	d, err := s.decide(ctx, policies.Hosts, v, in, principal, factsOf(c))
	if err != nil {
		return err
	}
	if d.Allow {
		return nil
	}
	status, code := http.StatusForbidden, wire.CodePolicyDenied
	if ids := d.RuleIDs(); len(ids) == 1 && ids[0] == "R2" {
		status, code = http.StatusConflict, wire.CodeSandboxesLive
	}
	p := newProblem(status, code, violationsDetail(d))
	p.RuleIDs, p.Violations, p.DecisionID = d.RuleIDs(), violationsOf(d.Violations), d.ID
	return p
}

// enrollHost is PUT /v1/hosts/{node}/enrollment.
func (s *Server) enrollHost(c echo.Context) error {
	body := bodyOf[*enrollRequest](c)
	if body == nil {
		body = &enrollRequest{}
	}
	req := EnrollRequest{Node: c.Param("node"), Egress: deref(body.Egress, false), Budget: map[string]int64{}}
	if b := body.Budget; b != nil {
		for k, f := range map[string]*int64{"max_sandboxes": b.MaxSandboxes, "cpu_mhz": b.CPUMHz, "memory_mb": b.MemoryMB} {
			if f != nil {
				req.Budget[k] = *f
			}
		}
	}
	h, err := s.enroll(c.Request().Context(), req, callerOf(c).principal(), c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.hostView(h))
}

// unenrollHost is DELETE /v1/hosts/{node}/enrollment[?reclaim=true].
func (s *Server) unenrollHost(c echo.Context) error {
	ctx := c.Request().Context()
	name := c.Param("node")
	reclaim := false
	switch q := c.QueryParam("reclaim"); q {
	case "", "false":
	case "true":
		reclaim = true
	default:
		return invalid("reclaim", "must be true or false, not %q", q)
	}
	h, err := s.readHost(ctx, name)
	if err != nil {
		return err
	}
	if h.record == nil {
		return newProblem(http.StatusConflict, wire.CodeHostNotEnrolled, fmt.Sprintf("node %q is not enrolled", name))
	}
	in := &policies.HostsInput{
		Action: "unenroll", Request: policies.HostsRequest{Reclaim: &reclaim},
		Effects: policies.HostsEffects{Reclaim: reclaim},
	}
	principal := callerOf(c).principal()
	if err := s.allowHosts(ctx, in, h, principal, c); err != nil {
		return err
	}
	reclaimed := []string{}
	if reclaim {
		// Draining first: no create lands on the node while it empties.
		if reclaimed, err = s.drainAndReclaim(ctx, *h.record, principal); err != nil {
			return err
		}
	}
	if err := s.cfg.Store.DeleteNode(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return unavailable("the enrollment could not be removed; retry", err)
	}
	s.log.Info("node unenrolled", "node", name, "reclaimed", len(reclaimed), "by", principal)
	h.record = nil
	return s.hostChanged(c, h, reclaimed)
}

// hostChanged answers a state change or an unenroll: the host as it is now
// and the sandboxes reclaimed on the way.
func (s *Server) hostChanged(c echo.Context, h host, reclaimed []string) error {
	s.nodes.invalidate()
	var err error
	if h.used, err = s.cfg.Store.NodeUsage(c.Request().Context(), h.name); err != nil {
		return unavailable("the node store could not be read", err)
	}
	return c.JSON(http.StatusOK, wire.HostChange{Host: s.hostView(h), Reclaimed: reclaimed})
}

// setHostState is POST /v1/hosts/{node}/state.
func (s *Server) setHostState(c echo.Context) error {
	ctx := c.Request().Context()
	name := c.Param("node")
	body := bodyOf[*stateRequest](c)
	if body == nil || body.State == nil {
		return invalid("state", "is required: active, frozen, reserved or draining")
	}
	h, err := s.readHost(ctx, name)
	if err != nil {
		return err
	}
	if h.record == nil {
		return newProblem(http.StatusConflict, wire.CodeHostNotEnrolled, fmt.Sprintf("node %q is not enrolled; enroll it first", name))
	}
	state := *body.State
	reclaim := state == stateDraining && h.used.Sandboxes > 0
	in := &policies.HostsInput{
		Action: "state", Request: policies.HostsRequest{State: state},
		Effects: policies.HostsEffects{Reclaim: reclaim},
	}
	principal := callerOf(c).principal()
	if err := s.allowHosts(ctx, in, h, principal, c); err != nil {
		return err
	}
	rec := *h.record
	rec.State, rec.UpdatedAt = state, s.cfg.Now().UTC()
	reclaimed := []string{}
	if state == stateDraining {
		// drainAndReclaim stores the draining state itself, before it reclaims.
		if reclaimed, err = s.drainAndReclaim(ctx, rec, principal); err != nil {
			return err
		}
	} else if err := s.cfg.Store.PutNode(ctx, rec); err != nil {
		return unavailable("the node state could not be stored; nothing was changed", err)
	}
	s.log.Info("node state changed", "node", name, "state", state, "reclaimed", len(reclaimed), "by", principal)
	h.record = &rec
	return s.hostChanged(c, h, reclaimed)
}

// drainAndReclaim stores the node as draining (no create lands on it from
// now on), then ends every live sandbox on it (R2). If some could not be
// ended, the node stays draining and the usage monitor retries them.
func (s *Server) drainAndReclaim(ctx context.Context, rec store.Node, principal string) ([]string, error) {
	rec.State, rec.UpdatedAt = stateDraining, s.cfg.Now().UTC()
	if err := s.cfg.Store.PutNode(ctx, rec); err != nil {
		return nil, unavailable("the node could not be set to draining; nothing was changed", err)
	}
	s.nodes.invalidate()
	ids, err := s.reclaimNode(ctx, rec.Name, principal)
	if err != nil {
		p := nomadUnavailable(fmt.Sprintf("node %s is draining; %d sandboxes were reclaimed, others could not be yet (the usage monitor retries): %v", rec.Name, len(ids), err), err)
		return ids, p
	}
	return ids, nil
}
