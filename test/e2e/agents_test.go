package e2e

import (
	"sync"

	"github.com/hashicorp/nomad/api"

	"sandgate/nomad/localnomad"
)

// agent is one Nomad agent process of the suite: the server-only agent or a
// client-only agent with the docker driver, as `sandgate dev --nomad-agent`
// runs them too (package localnomad).
type agent = localnomad.Agent

// resources are CPU (MHz) and memory (MB) figures.
type resources struct{ cpuMHz, memoryMB int64 }

// allocatables holds, by client agent, what Nomad can allocate on its node
// (NodeResources less ReservedResources), read when it became ready.
var allocatables sync.Map // *agent -> resources

// allocatable is what Nomad can allocate on the node of client agent a.
func allocatable(a *agent) resources {
	r, _ := allocatables.Load(a)
	res, _ := r.(resources)
	return res
}

// allocatableOf is what Nomad can allocate on n.
func allocatableOf(n *api.Node) resources {
	if n.NodeResources == nil {
		return resources{}
	}
	r := resources{n.NodeResources.Cpu.CpuShares, n.NodeResources.Memory.MemoryMB}
	if rr := n.ReservedResources; rr != nil {
		r.cpuMHz -= int64(rr.Cpu.CpuShares)     //nolint:gosec // G115: MHz
		r.memoryMB -= int64(rr.Memory.MemoryMB) //nolint:gosec // G115: MB
	}
	return r
}
