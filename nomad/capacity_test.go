package nomad

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The real node (node.json, a v1.6.5 agent) fingerprints 5192 MHz and
// 24105 MB with nothing reserved: that is what Nomad can allocate there.
func TestANodesAllocatableIsItsResourcesLessWhatIsReserved(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("nodes", "node")
	n, err := r.client().Node(context.Background(), "<hostname>")
	if err != nil {
		t.Fatal(err)
	}
	if !n.AllocatableKnown || n.Allocatable != (Resources{CPUMHz: 5192, MemoryMB: 24105}) {
		t.Fatalf("allocatable = %+v (known %v), want 5192 MHz and 24105 MB", n.Allocatable, n.AllocatableKnown)
	}
	reserved := &api.Node{
		NodeResources:     &api.NodeResources{Cpu: api.NodeCpuResources{CpuShares: 5192}, Memory: api.NodeMemoryResources{MemoryMB: 24105}},
		ReservedResources: &api.NodeReservedResources{Cpu: api.NodeReservedCpuResources{CpuShares: 500}, Memory: api.NodeReservedMemoryResources{MemoryMB: 1024}},
	}
	if got, ok := allocatableOf(reserved); !ok || got != (Resources{CPUMHz: 4692, MemoryMB: 23081}) {
		t.Fatalf("allocatable with a reservation = %+v, %v", got, ok)
	}
	if _, ok := allocatableOf(&api.Node{}); ok {
		t.Fatal("a node without NodeResources has a known allocatable")
	}
}

// node-allocations.json lists one running raw_exec allocation of job
// sandbox-rawexec holding 100 MHz and 64 MB: a sandbox under the prefix
// "sandbox-", another scheduler's job under any other prefix.
func TestNodeAllocatedSumsLiveAllocationsBySandboxPrefix(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("node-allocations")
	got, err := r.client().NodeAllocated(context.Background(), recNodeID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Allocated{Sandboxes: Resources{CPUMHz: 100, MemoryMB: 64}}); got != want {
		t.Fatalf("allocated = %+v, want %+v", got, want)
	}
	got, err = r.client(func(c *Config) { c.JobPrefix = "sandgate-sbx-" }).NodeAllocated(context.Background(), recNodeID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Allocated{Others: Resources{CPUMHz: 100, MemoryMB: 64}}); got != want {
		t.Fatalf("allocated under another prefix = %+v, want %+v", got, want)
	}
	if _, err := r.client().NodeAllocated(context.Background(), "../x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an invalid node id: %v", err)
	}
}

func TestTerminalAllocationsHoldNothing(t *testing.T) {
	t.Parallel()
	held := func(desired, client string) *api.Allocation {
		return &api.Allocation{JobID: "app", DesiredStatus: desired, ClientStatus: client, AllocatedResources: &api.AllocatedResources{
			Tasks: map[string]*api.AllocatedTaskResources{"t": {Cpu: api.AllocatedCpuResources{CpuShares: 300}, Memory: api.AllocatedMemoryResources{MemoryMB: 200, MemoryMaxMB: 900}}},
		}}
	}
	old := &api.Allocation{JobID: "sandbox-x", DesiredStatus: "run", ClientStatus: "pending", Resources: &api.Resources{CPU: new(50), MemoryMB: new(32)}} //nolint:staticcheck // SA1019: the fallback
	got := sumAllocated([]*api.Allocation{
		held("run", "running"), held("run", "pending"), held("stop", "running"), held("evict", "running"),
		held("run", "complete"), held("run", "failed"), held("run", "lost"), old, nil,
	}, "sandbox-")
	if want := (Allocated{Others: Resources{CPUMHz: 600, MemoryMB: 400}, Sandboxes: Resources{CPUMHz: 50, MemoryMB: 32}}); got != want {
		t.Fatalf("allocated = %+v, want %+v", got, want)
	}
}
