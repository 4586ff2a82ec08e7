package nomad

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// Alloc is one allocation of a gateway job.
type Alloc struct {
	ID, NodeID, NodeName, JobID string
	// Name is the allocation's name ("<job>.<group>[0]"): a replacement
	// Nomad places for a lost allocation carries the same name.
	Name string
	// CreateIndex orders a job's allocations: a higher one is newer.
	CreateIndex uint64
	// ClientStatus is "pending", "running", "complete", "failed", "lost" or
	// "unknown".
	ClientStatus string
	// DesiredStatus is "run", "stop" or "evict"; DesiredDescription says
	// why, e.g. "alloc is lost since its node is down".
	DesiredStatus      string
	DesiredDescription string
}

// Allocation reads one allocation. An unknown allocation is ErrNotFound; one
// that belongs to a job without the prefix is ErrForbiddenJob. A purged job's
// finished allocations stay readable until Nomad garbage-collects them.
func (c *Client) Allocation(ctx context.Context, allocID string) (Alloc, error) {
	return call(ctx, c, OpAllocation, func(ctx context.Context) (Alloc, error) {
		if !validID(allocID) {
			return Alloc{}, c.newError(OpAllocation, 0, fmt.Sprintf("invalid allocation id %q", allocID), ErrNotFound)
		}
		a, _, err := c.api.Allocations().Info(allocID, query(ctx))
		if err != nil {
			return Alloc{}, err
		}
		if err := c.checkJobID(OpAllocation, a.JobID); err != nil {
			return Alloc{}, err
		}
		return Alloc{
			ID: a.ID, NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, Name: a.Name, CreateIndex: a.CreateIndex,
			ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		}, nil
	})
}

// JobAllocations lists the allocations of one of the gateway's jobs, newest
// first. A job without allocations, or unknown to Nomad, gives an empty list.
func (c *Client) JobAllocations(ctx context.Context, jobID string) ([]Alloc, error) {
	return call(ctx, c, OpJobAllocations, func(ctx context.Context) ([]Alloc, error) {
		stubs, err := c.jobAllocs(ctx, OpJobAllocations, jobID)
		if err != nil {
			return nil, err
		}
		out := make([]Alloc, 0, len(stubs))
		for _, s := range stubs {
			out = append(out, allocFromStub(s))
		}
		return out, nil
	})
}

// jobAllocs lists a job's allocation stubs, newest (highest CreateIndex)
// first, after checking the prefix.
func (c *Client) jobAllocs(ctx context.Context, op, jobID string) ([]*api.AllocationListStub, error) {
	if err := c.checkJobID(op, jobID); err != nil {
		return nil, err
	}
	stubs, _, err := c.api.Jobs().Allocations(jobID, false, query(ctx))
	return stubs, err
}

// allocFromStub copies the fields the gateway uses out of a stub.
func allocFromStub(s *api.AllocationListStub) Alloc {
	return Alloc{
		ID: s.ID, NodeID: s.NodeID, NodeName: s.NodeName, JobID: s.JobID, Name: s.Name, CreateIndex: s.CreateIndex,
		ClientStatus: s.ClientStatus, DesiredStatus: s.DesiredStatus, DesiredDescription: s.DesiredDescription,
	}
}
