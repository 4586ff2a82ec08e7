// Package nodefacts is what the policy is told about a node: Nomad's view
// of it, its enrollment record and usage as policies.NodeFacts, its room
// (what Nomad can still allocate to sandboxes there) and its budget in
// force, clamped to that room (B1). The gateway, the CLI's `render --node`
// and the benchmarks build node facts here, so the admission input has one
// source beside jobspec; unlike jobspec it reads the Nomad client's and
// the store's types, so it stays out of jobspec's no-HTTP rule.
package nodefacts

import (
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// Of builds a policy input's node: Nomad's view, whether a Nomad server
// runs on it (controlPlane), the operator's record, and live usage. A
// node without an operator record is not enrolled; unknown usage stays
// nil and the policy denies on it.
func Of(n nomad.Node, controlPlane bool, rec *store.Node, usage *nomad.Usage) policies.NodeFacts {
	f := policies.NodeFacts{
		ID: n.ID, Name: n.Name, Status: n.Status, Eligibility: n.Eligibility, Drain: n.Drain,
		Attributes: n.Attributes, Meta: n.Meta, ControlPlane: controlPlane,
		OperatorState: "active", Enrollment: "none",
	}
	if f.Attributes == nil {
		f.Attributes = map[string]string{}
	}
	if f.Meta == nil {
		f.Meta = map[string]string{}
	}
	if rec != nil {
		f.Enrollment = rec.Enrollment
		if rec.State != "" {
			f.OperatorState = rec.State
		}
	}
	if usage != nil {
		mem, disk := usage.MemoryPercent, usage.DiskPercent
		f.Usage = policies.NodeUsage{MemoryPercent: &mem, DiskPercent: &disk}
	}
	return f
}

// Limits are a node's limits: its record's, or the policy default
// for each dimension the record leaves at zero; each of cpu_mhz and
// memory_mb clamped to room, what Nomad can still allocate to sandboxes on
// the node, when room is known (nil: not clamped). A node's budget never
// exceeds what Nomad can allocate there (B1; docs/runbook.md, budgets and
// allocatable).
func Limits(rec *store.Node, def policies.BudgetLimits, room *policies.Resources) policies.BudgetLimits {
	l := def
	if rec != nil {
		if rec.MaxSandboxes > 0 {
			l.MaxSandboxes = rec.MaxSandboxes
		}
		if rec.CPUMHz > 0 {
			l.CPUMHz = rec.CPUMHz
		}
		if rec.MemoryMB > 0 {
			l.MemoryMB = rec.MemoryMB
		}
	}
	if room != nil {
		l.CPUMHz = max(0, min(l.CPUMHz, room.CPUMHz))
		l.MemoryMB = max(0, min(l.MemoryMB, room.MemoryMB))
	}
	return l
}

// Capacity is a node's room for the policy input (node.capacity): what
// Nomad can allocate on it and what its allocations hold. Nil, which B1
// refuses, when the node reports no resources or its allocations are
// unknown.
func Capacity(n nomad.Node, a *nomad.Allocated) *policies.NodeCapacity {
	if !n.AllocatableKnown || a == nil {
		return nil
	}
	res := func(r nomad.Resources) policies.Resources {
		return policies.Resources{CPUMHz: r.CPUMHz, MemoryMB: r.MemoryMB}
	}
	return &policies.NodeCapacity{Allocatable: res(n.Allocatable), Others: res(a.Others), Sandboxes: res(a.Sandboxes)}
}

// Room is what Nomad can still allocate to sandboxes on a node: its
// allocatable less what other jobs hold (less nothing when c carries no
// allocations: pickNode knows only the node). Nil when unknown.
func Room(c *policies.NodeCapacity) *policies.Resources {
	if c == nil {
		return nil
	}
	return &policies.Resources{CPUMHz: c.Allocatable.CPUMHz - c.Others.CPUMHz, MemoryMB: c.Allocatable.MemoryMB - c.Others.MemoryMB}
}

// AllocatableRoom is room from the node alone (no allocations read):
// its allocatable, nil when unknown.
func AllocatableRoom(n nomad.Node) *policies.Resources {
	return Room(Capacity(n, &nomad.Allocated{}))
}
