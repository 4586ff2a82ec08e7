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

// endDiskQuota is the end reason of a sandbox that kept more in its task
// directories than the quota allows (H5).
const endDiskQuota = "disk_quota"

// enforceDiskQuotas is the usage monitor's per-sandbox pass (rule H5). Nomad
// bind-mounts /alloc and /local from the node's disk into every sandbox,
// read-write and uncapped; for each running sandbox with an allocation it
// walks both from outside (Nomad.TaskDirUsage: fs/ls only, bounded) and asks
// data.sandgate.reclaim.decision about that sandbox. A deny with H5 (past
// docker.task_dirs.quota_mb, or a walk that could not finish: a tree shaped
// against the walk) ends that sandbox alone with reason "disk_quota",
// through the lifecycle decision, releasing its budget. A Nomad error, an
// engine error or an INPUT deny ends nothing: it is logged and returned,
// and the next pass tries again. It returns how many sandboxes it ended.
// running are the running sandboxes with an allocation, nodes and servers
// Nomad's, perNode the live sandboxes per node, all read once by Reclaim.
// While no sandbox is running it makes no Nomad call.
func (s *Server) enforceDiskQuotas(ctx context.Context, running []store.Sandbox, nodes []nomad.Node, servers []nomad.ServerMember, perNode map[string]int64) (int, error) {
	ended := 0
	var errs []error
	for _, r := range running {
		i := slices.IndexFunc(nodes, func(n nomad.Node) bool { return n.Name == r.Node })
		if i < 0 {
			continue // reconcile ends sandboxes whose job or node is gone (L4)
		}
		over, err := s.overDiskQuota(ctx, nodes[i], nomad.Colocated(nodes[i], servers), perNode[r.Node], r)
		if err != nil {
			s.log.Warn("disk quota: sandbox not judged; nothing ended", "sandbox", r.ID, "err", err)
			errs = append(errs, err)
			continue
		}
		if !over {
			continue
		}
		if _, err := s.end(ctx, r.ID, endDiskQuota, principalReclaim); err != nil {
			errs = append(errs, fmt.Errorf("disk quota: end %s: %w", r.ID, err))
			continue
		}
		ended++
	}
	return ended, errors.Join(errs...)
}

// overDiskQuota measures one sandbox's task directories and asks the
// reclaim decision about it. It is true only for a deny whose violations
// include H5 and no INPUT.
func (s *Server) overDiskQuota(ctx context.Context, n nomad.Node, controlPlane bool, live int64, r store.Sandbox) (bool, error) {
	u, err := s.cfg.Nomad.TaskDirUsage(ctx, r.AllocID, s.taskName, nomad.DefaultWalkLimits())
	if err != nil {
		return false, fmt.Errorf("disk quota %s: measure: %w", r.ID, err)
	}
	rec, err := s.nodeRecord(ctx, n.Name)
	if err != nil {
		return false, err
	}
	in := &policies.ReclaimInput{
		Now: s.cfg.Now().Unix(), Node: nodefacts.Of(n, controlPlane, rec, nil),
		LiveSandboxes: live, Trigger: "monitor",
		Sandbox: &policies.ReclaimSandbox{ID: r.ID, TaskDirBytes: u.Bytes, WalkComplete: u.Complete},
	}
	v, err := in.Value()
	if err != nil {
		return false, err
	}
	d, err := s.decide(ctx, policies.Reclaim, v, in, principalReclaim, nil)
	if err != nil {
		return false, fmt.Errorf("disk quota %s: %w", r.ID, err)
	}
	ids := d.RuleIDs()
	switch {
	case d.Allow:
		return false, nil
	case slices.Contains(ids, "INPUT"):
		return false, fmt.Errorf("disk quota %s: the policy could not judge the sandbox: %s", r.ID, violationsDetail(d))
	case !slices.Contains(ids, "H5"):
		return false, nil // R2, R3: the node pass (Reclaim) acts on those
	}
	s.log.Warn("ending a sandbox past its task-directory quota", "sandbox", r.ID, "node", n.Name,
		"bytes", u.Bytes, "entries", u.Entries, "listings", u.Listings, "complete", u.Complete,
		"incomplete", u.Incomplete, "why", violationsDetail(d))
	return true, nil
}
