package nomad

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// OpNodeAllocated is the Op name of Client.NodeAllocated.
const OpNodeAllocated = "node_allocated"

// Resources are CPU (MHz, Nomad's CpuShares) and memory (MB) figures.
type Resources struct {
	CPUMHz   int64
	MemoryMB int64
}

// Allocated is what the non-terminal allocations on one node hold, as Nomad's
// scheduler counts it when it fits a new allocation there
// (AllocatedResources of every allocation that is neither stopped, evicted,
// complete, failed nor lost), split by whether the allocation's job carries
// the sandbox prefix (Config.JobPrefix).
type Allocated struct {
	// Sandboxes is held by allocations of prefixed jobs, in any namespace
	// (another gateway's sandboxes included).
	Sandboxes Resources
	// Others is held by every other allocation: the node's managed
	// applications, another scheduler's jobs.
	Others Resources
}

// allocatableOf is what Nomad can allocate on a node: NodeResources less
// ReservedResources (Nomad's own fit check, structs.AllocsFit, compares
// against the same). ok is false when the node reports no NodeResources.
func allocatableOf(n *api.Node) (Resources, bool) {
	if n.NodeResources == nil {
		return Resources{}, false
	}
	r := Resources{CPUMHz: n.NodeResources.Cpu.CpuShares, MemoryMB: n.NodeResources.Memory.MemoryMB}
	if rr := n.ReservedResources; rr != nil {
		r.CPUMHz -= int64(rr.Cpu.CpuShares)     //nolint:gosec // G115: MHz, far below 2^63
		r.MemoryMB -= int64(rr.Memory.MemoryMB) //nolint:gosec // G115: MB, far below 2^63
	}
	return r, true
}

// NodeAllocated reads the allocations of the node with ID nodeID
// (/v1/node/{id}/allocations, every namespace) and sums what the
// non-terminal ones hold. An unknown node is ErrNotFound (Nomad answers an
// empty list for a node ID it does not know: the caller has read the node
// first).
func (c *Client) NodeAllocated(ctx context.Context, nodeID string) (Allocated, error) {
	return call(ctx, c, OpNodeAllocated, func(ctx context.Context) (Allocated, error) {
		if !validID(nodeID) {
			return Allocated{}, c.newError(OpNodeAllocated, 0, fmt.Sprintf("invalid node id %q", nodeID), ErrNotFound)
		}
		allocs, _, err := c.api.Nodes().Allocations(nodeID, query(ctx))
		if err != nil {
			return Allocated{}, err
		}
		return sumAllocated(allocs, c.cfg.JobPrefix), nil
	})
}

// sumAllocated adds up what the non-terminal allocations hold, sandboxes
// (jobs with prefix) apart.
func sumAllocated(allocs []*api.Allocation, prefix string) Allocated {
	var out Allocated
	for _, a := range allocs {
		if a == nil || allocTerminal(a.DesiredStatus, a.ClientStatus) {
			continue
		}
		r := allocResources(a)
		dst := &out.Others
		if strings.HasPrefix(a.JobID, prefix) {
			dst = &out.Sandboxes
		}
		dst.CPUMHz += r.CPUMHz
		dst.MemoryMB += r.MemoryMB
	}
	return out
}

// allocTerminal is Nomad's Allocation.TerminalStatus: such an allocation
// no longer holds resources on its node.
func allocTerminal(desired, client string) bool {
	switch desired {
	case api.AllocDesiredStatusStop, api.AllocDesiredStatusEvict:
		return true
	}
	switch client {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// allocResources is what one allocation holds: its tasks' AllocatedResources
// (CpuShares, MemoryMB: memory_max oversubscription is not reserved), or the
// deprecated Resources when an agent sends no AllocatedResources.
func allocResources(a *api.Allocation) Resources {
	var r Resources
	if ar := a.AllocatedResources; ar != nil {
		for _, t := range ar.Tasks {
			if t != nil {
				r.CPUMHz += t.Cpu.CpuShares
				r.MemoryMB += t.Memory.MemoryMB
			}
		}
		return r
	}
	if old := a.Resources; old != nil { //nolint:staticcheck // SA1019: the fallback for agents without AllocatedResources
		if old.CPU != nil {
			r.CPUMHz = int64(*old.CPU)
		}
		if old.MemoryMB != nil {
			r.MemoryMB = int64(*old.MemoryMB)
		}
	}
	return r
}
