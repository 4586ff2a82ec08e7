package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// principalReclaim names the usage monitor in the decision log.
const principalReclaim = "system:reclaim"

// Reclaim is one pass of the usage monitor (rules R2, R3, H5, L4), on one
// read of the live records and of Nomad's nodes:
//   - for every node that holds live sandboxes it reads the node's Nomad
//     state and usage and asks data.sandgate.reclaim.decision whether they
//     may stay; a deny with R2 (a Nomad or operator drain) or R3 (disk or
//     memory past the reclaim thresholds) reclaims every sandbox on the
//     node through the lifecycle decision, releasing their budgets; an
//     INPUT deny, an engine error or an unreadable node reclaims nothing;
//   - the allocation watch ends every running sandbox whose allocation
//     Nomad replaced or ended (reason lost);
//   - the rest are measured against their task-directory quota
//     (enforceDiskQuotas, H5).
//
// It returns how many sandboxes it ended. While no sandbox is live it makes
// no Nomad call.
func (s *Server) Reclaim(ctx context.Context) (int, error) {
	live, err := s.cfg.Store.List(ctx, store.Filter{LiveOnly: true})
	if err != nil {
		return 0, err
	}
	perNode := map[string]int64{}
	for _, r := range live {
		perNode[r.Node]++
	}
	if len(perNode) == 0 {
		return 0, nil
	}
	nodes, servers, err := s.nodes.list(ctx)
	if err != nil {
		return 0, fmt.Errorf("reclaim: list nodes: %w", err)
	}
	names := make([]string, 0, len(perNode))
	for name := range perNode {
		names = append(names, name)
	}
	slices.Sort(names)
	ended := 0
	gone := map[string]bool{} // ended by this pass
	var errs []error
	for _, name := range names {
		i := slices.IndexFunc(nodes, func(n nomad.Node) bool { return n.Name == name })
		if i < 0 {
			continue // reconcile ends sandboxes whose job or node is gone (L4)
		}
		reclaim, err := s.mustReclaim(ctx, nodes[i], nomad.Colocated(nodes[i], servers), perNode[name], "monitor")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !reclaim {
			continue
		}
		ids, err := s.reclaimNode(ctx, name, principalReclaim)
		ended += len(ids)
		for _, id := range ids {
			gone[id] = true
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	var running []store.Sandbox
	for _, r := range live {
		if !gone[r.ID] && r.State == store.StateRunning && r.AllocID != "" {
			running = append(running, r)
		}
	}
	lost, err := s.watchAllocations(ctx, running)
	ended += countEnded(lost)
	if err != nil {
		errs = append(errs, err)
	}
	running = slices.DeleteFunc(running, func(r store.Sandbox) bool { _, gone := lost[r.ID]; return gone })
	n, err := s.enforceDiskQuotas(ctx, running, nodes, servers, perNode)
	ended += n
	if err != nil {
		errs = append(errs, err)
	}
	return ended, errors.Join(errs...)
}

// mustReclaim asks the reclaim decision for one node. It is true only for
// a deny whose violations are R2 or R3 and include no INPUT.
func (s *Server) mustReclaim(ctx context.Context, n nomad.Node, controlPlane bool, live int64, trigger string) (bool, error) {
	rec, err := s.nodeRecord(ctx, n.Name)
	if err != nil {
		return false, err
	}
	var usage *nomad.Usage
	if u, err := s.cfg.Nomad.NodeUsage(ctx, n.ID); err == nil {
		usage = &u
	} else {
		s.log.Warn("reclaim: node usage unknown; only a drain can reclaim", "node", n.Name, "err", err)
	}
	in := &policies.ReclaimInput{
		Now: s.cfg.Now().Unix(), Node: nodefacts.Of(n, controlPlane, rec, usage),
		LiveSandboxes: live, Trigger: trigger,
	}
	v, err := in.Value()
	if err != nil {
		return false, err
	}
	d, err := s.decide(ctx, policies.Reclaim, v, in, principalReclaim, nil)
	if err != nil {
		return false, fmt.Errorf("reclaim %s: %w", n.Name, err)
	}
	if d.Allow {
		return false, nil
	}
	ids := d.RuleIDs()
	if slices.Contains(ids, "INPUT") {
		return false, fmt.Errorf("reclaim %s: the policy could not judge the node: %s", n.Name, violationsDetail(d))
	}
	s.log.Warn("reclaiming the sandboxes of a node", "node", n.Name, "rules", ids, "why", violationsDetail(d))
	return true, nil
}

// reclaimNode ends every live sandbox on node with reason "reclaimed"
// (each end is a lifecycle decision). It returns the ids it ended; an
// error says which could not be, and those stay live, holding their budget,
// for the next pass.
func (s *Server) reclaimNode(ctx context.Context, node, principal string) ([]string, error) {
	live, err := s.cfg.Store.List(ctx, store.Filter{Node: node, LiveOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reclaim %s: %w", node, err)
	}
	ended := []string{}
	var errs []error
	for _, r := range live {
		if _, err := s.end(ctx, r.ID, "reclaimed", principal); err != nil {
			errs = append(errs, fmt.Errorf("reclaim %s: %w", r.ID, err))
			continue
		}
		ended = append(ended, r.ID)
	}
	return ended, errors.Join(errs...)
}
