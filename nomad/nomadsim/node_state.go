package nomadsim

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Node state changes: drain, eligibility and status, from the HTTP API and
// from the control methods tests use. Callers of *Locked hold Server.mu.

func addNodeEvent(n *api.Node, subsystem, msg string, now time.Time, index uint64) {
	n.Events = append(n.Events, &api.NodeEvent{
		Message: msg, Subsystem: subsystem, Timestamp: now.UTC().Truncate(time.Second), CreateIndex: index,
	})
}

// updateDrainLocked applies Nomad's drain semantics: a drain marks the node
// ineligible; on a node without live allocations it completes at once (and
// the node stays ineligible); cancelling leaves it ineligible unless
// markEligible. A drain with a positive deadline stops the node's remaining
// allocations when the deadline passes; a negative one does so at once.
func (s *Server) updateDrainLocked(id string, spec *api.DrainSpec, markEligible bool, meta map[string]string) (*api.NodeDrainUpdateResponse, uint64, error) {
	n := s.nodeByIDLocked(id)
	if n == nil {
		return nil, 0, fmt.Errorf("%s", errNodeNotFound)
	}
	now := time.Now()
	index := s.nextIndexLocked()
	node := n.n
	resp := &api.NodeDrainUpdateResponse{NodeModifyIndex: index}
	if n.drainTimer != nil {
		n.drainTimer.Stop()
		n.drainTimer = nil
	}
	switch {
	case spec != nil:
		msg := msgDrainSet
		if node.DrainStrategy != nil {
			msg = msgDrainUpdated
		}
		ds := &api.DrainStrategy{DrainSpec: *spec, StartedAt: now.UTC()}
		if spec.Deadline > 0 {
			ds.ForceDeadline = now.Add(spec.Deadline).UTC()
		}
		node.DrainStrategy = ds
		node.Drain = true
		node.SchedulingEligibility = api.NodeSchedulingIneligible
		node.LastDrain = &api.DrainMetadata{
			StartedAt: now.UTC().Truncate(time.Second), UpdatedAt: now.UTC().Truncate(time.Second),
			Status: api.DrainStatusDraining, Meta: meta,
		}
		addNodeEvent(node, subsystemDrain, msg, now, index)
		switch {
		case spec.Deadline < 0:
			s.forceDrainLocked(n)
		case s.liveAllocsOnNodeLocked(node.ID) == 0:
			s.completeDrainLocked(n)
		case spec.Deadline > 0:
			nodeID := node.ID
			n.drainTimer = time.AfterFunc(spec.Deadline, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if sn := s.nodeByIDLocked(nodeID); sn != nil && !s.closed && sn.n.DrainStrategy != nil {
					s.forceDrainLocked(sn)
				}
			})
		}
	default:
		if node.DrainStrategy != nil {
			node.DrainStrategy = nil
			node.Drain = false
			if node.LastDrain != nil {
				node.LastDrain.Status = api.DrainStatusCanceled
				node.LastDrain.UpdatedAt = now.UTC().Truncate(time.Second)
			}
			addNodeEvent(node, subsystemDrain, msgDrainDisabled, now, index)
		}
		if markEligible && node.SchedulingEligibility != api.NodeSchedulingEligible {
			node.SchedulingEligibility = api.NodeSchedulingEligible
			resp.EvalIDs, resp.EvalCreateIndex = s.retryBlockedLocked()
		}
	}
	node.ModifyIndex = index
	return resp, index, nil
}

// completeDrainLocked ends a drain whose node has no live allocations left.
func (s *Server) completeDrainLocked(n *simNode) {
	if n.n.DrainStrategy == nil {
		return
	}
	now := time.Now()
	n.n.DrainStrategy = nil
	n.n.Drain = false
	if n.n.LastDrain != nil {
		n.n.LastDrain.Status = api.DrainStatusComplete
		n.n.LastDrain.UpdatedAt = now.UTC().Truncate(time.Second)
	}
	if n.drainTimer != nil {
		n.drainTimer.Stop()
		n.drainTimer = nil
	}
	index := s.nextIndexLocked()
	addNodeEvent(n.n, subsystemDrain, msgDrainComplete, now, index)
	n.n.ModifyIndex = index
}

// forceDrainLocked stops the node's remaining allocations (the simulator
// does not migrate them) and completes the drain.
func (s *Server) forceDrainLocked(n *simNode) {
	for _, id := range s.allocOrder {
		a := s.allocs[id]
		if a.a.NodeID == n.n.ID && !allocTerminal(a.a) {
			s.stopAllocLocked(a, "alloc is being migrated")
		}
	}
	s.completeDrainLocked(n)
}

func (s *Server) updateEligibilityLocked(id, elig string) (*api.NodeEligibilityUpdateResponse, uint64, error) {
	if elig != api.NodeSchedulingEligible && elig != api.NodeSchedulingIneligible {
		return nil, 0, fmt.Errorf("invalid scheduling eligibility %q", elig)
	}
	n := s.nodeByIDLocked(id)
	if n == nil {
		return nil, 0, fmt.Errorf("%s", errNodeNotFound)
	}
	if n.n.DrainStrategy != nil && elig == api.NodeSchedulingEligible {
		return nil, 0, fmt.Errorf("%s", errEligibleWhileDrn)
	}
	index := s.nextIndexLocked()
	resp := &api.NodeEligibilityUpdateResponse{}
	if n.n.SchedulingEligibility != elig {
		msg := msgMarkedIneligible
		if elig == api.NodeSchedulingEligible {
			msg = msgMarkedEligible
		}
		n.n.SchedulingEligibility = elig
		n.n.ModifyIndex = index
		addNodeEvent(n.n, subsystemCluster, msg, time.Now(), index)
		if elig == api.NodeSchedulingEligible {
			resp.EvalIDs, resp.EvalCreateIndex = s.retryBlockedLocked()
		}
	}
	return resp, index, nil
}

// NodeID returns the ID of the node called name.
func (s *Server) NodeID(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nodeByNameLocked(name)
	if err != nil {
		return "", err
	}
	return n.n.ID, nil
}

// SetNodeStatus sets a node's status ("ready", "down", "initializing",
// "disconnected"). "down" is what the servers decide for a client agent that
// stopped heartbeating (killed, crashed, cut off): the node gets the event
// "Node heartbeat missed", its live allocations become lost and are replaced
// where another node fits, else a blocked evaluation waits (see
// nodeLostLocked); exec and logs on its allocations answer "No path to node".
// A node that comes back from down is the client agent restarted on its data
// dir: "Node reregistered by heartbeat", the lost allocations' tasks are
// stopped (nodeBackLocked). A node that becomes ready gets blocked
// evaluations retried, which places the replacements on it when it is the
// only node that fits, as Nomad did (real-lost-*.json).
func (s *Server) SetNodeStatus(name, status string) error {
	if !validNodeStatus(status) {
		return fmt.Errorf("nomadsim: invalid node status %q", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nodeByNameLocked(name)
	if err != nil {
		return err
	}
	if n.n.Status == status {
		return nil
	}
	now := time.Now()
	index := s.nextIndexLocked()
	wasDown := n.n.Status == api.NodeStatusDown
	n.n.Status = status
	n.n.StatusUpdatedAt = now.Unix()
	n.n.ModifyIndex = index
	switch {
	case status == api.NodeStatusDown:
		addNodeEvent(n.n, subsystemCluster, msgHeartbeatMissed, now, index)
		s.nodeLostLocked(n)
	case wasDown:
		// The restarted client registers first (initializing), which
		// evaluates the node's jobs before the node can take work; then it
		// reports the status asked for.
		addNodeEvent(n.n, subsystemCluster, msgReregistered, now, index)
		n.n.Status = api.NodeStatusInit
		s.nodeBackLocked(n)
		s.nodeUpdateEvalsLocked(n)
		n.n.Status = status
	}
	if status == api.NodeStatusReady {
		s.retryBlockedLocked()
		if wasDown {
			s.nodeUpdateEvalsLocked(n)
		}
	}
	return nil
}

// nodeUpdateEvalsLocked creates and runs a node-update evaluation for each
// job with an allocation on the node, as Nomad does when a node registers or
// changes status: run while the node is initializing, one for a job whose
// replacement waits on this node fails again and supersedes the blocked
// evaluation; run once it is ready and the replacement is placed, it has
// nothing to do (real-lost-job-evaluations-after-restart.json).
func (s *Server) nodeUpdateEvalsLocked(n *simNode) {
	var jobs []string
	for _, id := range s.allocOrder {
		a := s.allocs[id].a
		if a.NodeID == n.n.ID && !slices.Contains(jobs, a.JobID) {
			jobs = append(jobs, a.JobID)
		}
	}
	now := time.Now()
	for _, jobID := range jobs {
		sj := s.jobs[jobID]
		if sj == nil {
			continue
		}
		eval := s.newEvalLocked(sj.job, triggerNodeUpdate, s.nextIndexLocked(), now)
		eval.NodeID, eval.NodeModifyIndex = n.n.ID, n.n.ModifyIndex
		s.scheduleLocked(sj, eval, now)
	}
}

// SetNodeDrain starts (with a one-hour deadline, like `nomad node drain
// -enable`) or cancels a drain on the named node, with the API's semantics.
func (s *Server) SetNodeDrain(name string, drain bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nodeByNameLocked(name)
	if err != nil {
		return err
	}
	var spec *api.DrainSpec
	if drain {
		spec = &api.DrainSpec{Deadline: time.Hour}
	}
	_, _, err = s.updateDrainLocked(n.n.ID, spec, false, nil)
	return err
}

// SetNodeEligibility sets "eligible" or "ineligible" with the API's
// semantics (eligible while draining is an error).
func (s *Server) SetNodeEligibility(name, eligibility string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nodeByNameLocked(name)
	if err != nil {
		return err
	}
	_, _, err = s.updateEligibilityLocked(n.n.ID, eligibility)
	return err
}

// SetNodeUsage sets the named node's base memory and disk usage, in
// percent (0-100): /v1/client/stats reports it plus what the node's running
// allocations hold (their containers, the files in their tmpfs areas, their
// writes to disk), so usage moves with the sandboxes as on a real agent.
func (s *Server) SetNodeUsage(name string, memPercent, diskPercent float64) error {
	if memPercent < 0 || memPercent > 100 || diskPercent < 0 || diskPercent > 100 {
		return fmt.Errorf("nomadsim: usage percentages must be within 0-100")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nodeByNameLocked(name)
	if err != nil {
		return err
	}
	n.memPct, n.diskPct = memPercent, diskPercent
	return nil
}

// nodeUnreachableLocked reports whether the servers have no connection to
// the node's client, so client endpoints (exec, logs, stats) on its
// allocations fail with "No path to node": the node is down.
func (s *Server) nodeUnreachableLocked(nodeID string) bool {
	n := s.nodeByIDLocked(nodeID)
	return n != nil && n.n.Status == api.NodeStatusDown
}
