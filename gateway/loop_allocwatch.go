package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"sandgate/gateway/wire"
	"sandgate/nomad"
	"sandgate/store"
)

// principalWatch names the allocation watch in the decision log.
const principalWatch = "system:allocwatch"

// fate is what became of a running sandbox's allocation, as Nomad reports it.
type fate int

const (
	// fateRunning: the recorded allocation runs as recorded.
	fateRunning fate = iota
	// fateUnreachable: Nomad still holds the allocation but its node is
	// down, disconnected or not answering (ClientStatus lost or unknown, or
	// Nomad stopping it while no replacement runs yet). Nothing can reach
	// the container; when the node returns Nomad replaces the allocation by
	// a new, empty container (even with restarts and rescheduling off).
	fateUnreachable
	// fateStopping: the allocation still runs on its node but Nomad is
	// stopping it (its job was stopped, as a destroy does, or its node is
	// drained): the container is going away.
	fateStopping
	// fateLost: the container is gone for good: the allocation ended, was
	// garbage-collected, or Nomad placed a replacement. The sandbox's state
	// (its files, its processes) is lost.
	fateLost
)

// allocFate reads the job's allocations and judges the record's one. The
// detail says, for people, what Nomad reported.
func (s *Server) allocFate(ctx context.Context, rec store.Sandbox) (fate, string, error) {
	allocs, err := s.cfg.Nomad.JobAllocations(ctx, rec.JobID)
	if err != nil {
		return fateRunning, "", err
	}
	var own *nomad.Alloc
	for i := range allocs {
		if allocs[i].ID == rec.AllocID {
			own = &allocs[i]
		}
	}
	if own == nil {
		return fateLost, fmt.Sprintf("allocation %s is gone from Nomad", shortAlloc(rec.AllocID)), nil
	}
	for _, a := range allocs {
		if a.ID != own.ID && a.CreateIndex > own.CreateIndex && (a.ClientStatus == "pending" || a.ClientStatus == "running") {
			return fateLost, fmt.Sprintf("Nomad replaced allocation %s (%s, %s) by %s (%s) on node %s: a new, empty container",
				shortAlloc(own.ID), own.ClientStatus, orText(own.DesiredDescription, own.DesiredStatus), shortAlloc(a.ID), a.ClientStatus, a.NodeName), nil
		}
	}
	switch own.ClientStatus {
	case "running":
		if own.DesiredStatus == "run" {
			return fateRunning, "", nil
		}
		return fateStopping, fmt.Sprintf("Nomad is stopping allocation %s (%s)", shortAlloc(own.ID), orText(own.DesiredDescription, own.DesiredStatus)), nil
	case "complete", "failed":
		return fateLost, fmt.Sprintf("allocation %s is %s on node %s: its container ended", shortAlloc(own.ID), own.ClientStatus, own.NodeName), nil
	}
	return fateUnreachable, fmt.Sprintf("allocation %s is %s on node %s (%s)", shortAlloc(own.ID), own.ClientStatus, own.NodeName,
		orText(own.DesiredDescription, "its node is down or unreachable")), nil
}

// streamFailed answers an exec or logs call that Nomad could not serve:
// the sandbox's allocation decides. A lost sandbox is ended (reason lost,
// budget released, token revoked) and answers 410 sandbox_lost; an
// unreachable one answers 503 nomad_unavailable with Retry-After and stays
// as it is; otherwise the failure was Nomad's own, a 503 as well.
func (s *Server) streamFailed(ctx context.Context, rec store.Sandbox, what string, cause error) error {
	f, detail, err := s.allocFate(ctx, rec)
	switch {
	case err != nil:
		return nomadUnavailable(what+" failed and Nomad could not say what became of the sandbox's allocation; nothing was changed, retry", errors.Join(cause, err))
	case f == fateLost:
		ended, now, err := s.endLost(ctx, rec, detail)
		if err != nil {
			return err
		}
		if !now && ended.EndReason != "lost" {
			return endedProblem(ended) // a destroy or another end came first: say that one
		}
		return lostProblem(ended)
	case f == fateUnreachable || f == fateStopping || errors.Is(cause, nomad.ErrNodeUnreachable):
		if detail == "" {
			detail = "Nomad: no path to the node; its client agent is down or disconnected"
		}
		return nomadUnavailable(fmt.Sprintf("%s failed: the sandbox's node %s is down or unreachable (%s); retry. If Nomad replaces the allocation when the node returns, the sandbox's state is lost and it ends", what, rec.Node, detail), cause)
	}
	return nomadUnavailable(what+" failed in Nomad although the allocation runs; nothing was changed, retry", cause)
}

// endLost ends a sandbox whose allocation is lost, through the lifecycle
// decision, with the detail as its last error.
// ended is false when the sandbox had ended otherwise first (a destroy
// racing the watch: its allocation is complete because it was purged),
// and nothing is said of it.
func (s *Server) endLost(ctx context.Context, rec store.Sandbox, detail string) (out store.Sandbox, ended bool, err error) {
	out, ended, err = s.endOnce(ctx, rec.ID, "lost", detail, principalWatch)
	if ended {
		s.log.Warn("sandbox lost: Nomad replaced or ended its allocation", "sandbox", rec.ID, "node", rec.Node, "detail", detail)
	}
	return out, ended, err
}

// lostProblem is the 410 of a sandbox whose state was lost.
func lostProblem(rec store.Sandbox) *Problem {
	return newProblem(http.StatusGone, wire.CodeSandboxLost, fmt.Sprintf("sandbox %q was lost and has ended: %s", rec.ID, orText(rec.LastError, rec.EndReason)))
}

// WatchAllocations is one pass of the allocation watch alone (Reclaim runs
// it on every pass of the usage monitor): every running sandbox whose
// allocation Nomad ended or replaced is ended with reason lost, releasing
// its budget. Unreachable sandboxes are left as they are (their node may
// come back with them). It returns how many it ended.
func (s *Server) WatchAllocations(ctx context.Context) (int, error) {
	live, err := s.cfg.Store.List(ctx, store.Filter{LiveOnly: true})
	if err != nil {
		return 0, err
	}
	lost, err := s.watchAllocations(ctx, live)
	return countEnded(lost), err
}

// watchAllocations judges the allocation of each running sandbox given
// (one Nomad call each) and ends the lost ones; it returns their ids,
// each true when this pass ended it, false when it had ended otherwise
// first.
func (s *Server) watchAllocations(ctx context.Context, running []store.Sandbox) (map[string]bool, error) {
	lost := map[string]bool{}
	var errs []error
	for _, r := range running {
		if r.State != store.StateRunning || r.AllocID == "" {
			continue
		}
		if _, busy := s.inflight.Load(r.ID); busy {
			continue
		}
		f, detail, err := s.allocFate(ctx, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("allocation watch %s: %w", r.ID, err))
			continue
		}
		if f != fateLost {
			continue
		}
		_, ended, err := s.endLost(ctx, r, detail)
		if err != nil {
			errs = append(errs, fmt.Errorf("allocation watch %s: %w", r.ID, err))
			continue
		}
		lost[r.ID] = ended // ended otherwise first: not counted, still not running
	}
	return lost, errors.Join(errs...)
}

// countEnded counts the sandboxes watchAllocations ended itself.
func countEnded(lost map[string]bool) int {
	n := 0
	for _, ended := range lost {
		if ended {
			n++
		}
	}
	return n
}

func shortAlloc(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
