package nodefacts_test

import (
	"testing"

	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

func TestANodeWithoutARecordIsNotEnrolledAndItsUnknownUsageStaysUnknown(t *testing.T) {
	t.Parallel()
	f := nodefacts.Of(nomad.Node{ID: "n1", Name: "worker-1", Status: "ready"}, true, nil, nil)
	if f.Enrollment != "none" || f.OperatorState != "active" || !f.ControlPlane {
		t.Fatalf("enrollment %q state %q control plane %v", f.Enrollment, f.OperatorState, f.ControlPlane)
	}
	if f.Attributes == nil || f.Meta == nil {
		t.Fatal("absent attributes or meta must be empty maps: the policy reads them as objects")
	}
	if f.Usage.MemoryPercent != nil || f.Usage.DiskPercent != nil {
		t.Fatalf("unknown usage became %+v", f.Usage)
	}
}

func TestARecordAndUsageReachTheFacts(t *testing.T) {
	t.Parallel()
	rec := &store.Node{Name: "worker-1", Enrollment: "sandbox+egress", State: "frozen"}
	f := nodefacts.Of(nomad.Node{Name: "worker-1"}, false, rec, &nomad.Usage{MemoryPercent: 41.5, DiskPercent: 7})
	if f.Enrollment != "sandbox+egress" || f.OperatorState != "frozen" {
		t.Fatalf("enrollment %q state %q", f.Enrollment, f.OperatorState)
	}
	if f.Usage.MemoryPercent == nil || *f.Usage.MemoryPercent != 41.5 || *f.Usage.DiskPercent != 7 {
		t.Fatalf("usage %+v", f.Usage)
	}
	// A record without a state is active.
	if f := nodefacts.Of(nomad.Node{}, false, &store.Node{Enrollment: "sandbox"}, nil); f.OperatorState != "active" {
		t.Fatalf("a record without a state is %q", f.OperatorState)
	}
}

func TestLimitsTakeTheRecordsFiguresAndNeverExceedTheRoom(t *testing.T) {
	t.Parallel()
	def := policies.BudgetLimits{MaxSandboxes: 8, CPUMHz: 4000, MemoryMB: 4096}
	for _, tc := range []struct {
		name string
		rec  *store.Node
		room *policies.Resources
		want policies.BudgetLimits
	}{
		{"no record: the default", nil, nil, def},
		{"a record's non-zero figures win", &store.Node{MaxSandboxes: 2, CPUMHz: 1000}, nil, policies.BudgetLimits{MaxSandboxes: 2, CPUMHz: 1000, MemoryMB: 4096}},
		{"clamped to the room", nil, &policies.Resources{CPUMHz: 1500, MemoryMB: 8192}, policies.BudgetLimits{MaxSandboxes: 8, CPUMHz: 1500, MemoryMB: 4096}},
		{"a negative room is no room", nil, &policies.Resources{CPUMHz: -10, MemoryMB: -1}, policies.BudgetLimits{MaxSandboxes: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := nodefacts.Limits(tc.rec, def, tc.room); got != tc.want {
				t.Fatalf("Limits = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCapacityIsUnknownWithoutAllocatableOrAllocations(t *testing.T) {
	t.Parallel()
	n := nomad.Node{AllocatableKnown: true, Allocatable: nomad.Resources{CPUMHz: 4000, MemoryMB: 8192}}
	a := &nomad.Allocated{Others: nomad.Resources{CPUMHz: 1000, MemoryMB: 1024}, Sandboxes: nomad.Resources{CPUMHz: 500, MemoryMB: 256}}
	if c := nodefacts.Capacity(nomad.Node{}, a); c != nil {
		t.Fatalf("a node without allocatable has capacity %+v", c)
	}
	if c := nodefacts.Capacity(n, nil); c != nil {
		t.Fatalf("unknown allocations gave capacity %+v", c)
	}
	c := nodefacts.Capacity(n, a)
	if c == nil || c.Allocatable.CPUMHz != 4000 || c.Others.MemoryMB != 1024 || c.Sandboxes.CPUMHz != 500 {
		t.Fatalf("capacity %+v", c)
	}
	if r := nodefacts.Room(c); r == nil || r.CPUMHz != 3000 || r.MemoryMB != 7168 {
		t.Fatalf("room %+v, want allocatable less the other jobs' share", r)
	}
	if r := nodefacts.AllocatableRoom(n); r == nil || r.CPUMHz != 4000 {
		t.Fatalf("allocatable room %+v", r)
	}
	if nodefacts.Room(nil) != nil || nodefacts.AllocatableRoom(nomad.Node{}) != nil {
		t.Fatal("unknown capacity must give unknown room")
	}
}
