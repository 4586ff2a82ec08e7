package nomadsim

import (
	"reflect"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// placement is what one registration led to.
type placement struct {
	nodes    []string       // names of nodes the job's allocations run on
	filtered map[string]int // ConstraintFiltered of a failed placement
	blocked  *api.Evaluation
	status   string
}

func place(t *testing.T, c *api.Client, job *api.Job) placement {
	t.Helper()
	resp := register(t, c, job)
	eval, _, err := c.Evaluations().Info(resp.EvalID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if eval.Status != "complete" {
		t.Errorf("register eval status %q, want complete", eval.Status)
	}
	var p placement
	if m := eval.FailedTGAllocs[*job.TaskGroups[0].Name]; m != nil {
		p.filtered = m.ConstraintFiltered
		if eval.BlockedEval == "" {
			t.Errorf("failed placement without a blocked eval")
		}
		p.blocked, _, err = c.Evaluations().Info(eval.BlockedEval, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	stubs, _, err := c.Jobs().Allocations(*job.ID, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range stubs {
		p.nodes = append(p.nodes, a.NodeName)
	}
	info, _, err := c.Jobs().Info(*job.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.status = *info.Status
	return p
}

func TestPlacementFollowsConstraintsDriversAndNodeState(t *testing.T) {
	t.Parallel()
	cpConstraint := api.NewConstraint("${meta."+ControlPlaneMetaKey+"}", "!=", "true")
	cases := []struct {
		name     string
		cfg      func(*Config)
		setup    func(t *testing.T, s *Server, c *api.Client)
		job      func() *api.Job
		nodes    []string
		filtered map[string]int
	}{
		{
			name:  "the node.unique.name constraint places on the named worker",
			job:   func() *api.Job { return sandboxJob("j", "worker-2") },
			nodes: []string{"worker-2"},
		},
		{
			name:  "the node.unique.name constraint resolves to the control-plane node's name",
			job:   func() *api.Job { return sandboxJob("j", "control-1") },
			nodes: []string{"control-1"},
		},
		{
			name:     "an unknown node name blocks with the constraint as the reason",
			job:      func() *api.Job { return sandboxJob("j", "no-such-node") },
			filtered: map[string]int{"${node.unique.name} = no-such-node": 3},
		},
		{
			name: "a control-plane-only exclusion keeps a job pinned to the control node unplaced",
			job: func() *api.Job {
				j := sandboxJob("j", "control-1")
				j.Constraints = append([]*api.Constraint{cpConstraint}, j.Constraints...)
				return j
			},
			filtered: map[string]int{"${meta.sandgate.control_plane} != true": 1, "${node.unique.name} = control-1": 2},
		},
		{
			name:     "a drained (ineligible) node is not a candidate",
			setup:    func(t *testing.T, s *Server, _ *api.Client) { must(t, s.SetNodeDrain("worker-1", true)) },
			job:      func() *api.Job { return sandboxJob("j", "worker-1") },
			filtered: map[string]int{"${node.unique.name} = worker-1": 2},
		},
		{
			name: "a node that is still draining is not a candidate",
			setup: func(t *testing.T, s *Server, c *api.Client) {
				runningAlloc(t, c, sandboxJob("busy", "worker-1"))
				must(t, s.SetNodeDrain("worker-1", true))
			},
			job:      func() *api.Job { return sandboxJob("j", "worker-1") },
			filtered: map[string]int{"${node.unique.name} = worker-1": 2},
		},
		{
			name:     "a down node is not a candidate",
			setup:    func(t *testing.T, s *Server, _ *api.Client) { must(t, s.SetNodeStatus("worker-1", "down")) },
			job:      func() *api.Job { return sandboxJob("j", "worker-1") },
			filtered: map[string]int{"${node.unique.name} = worker-1": 2},
		},
		{
			name:     "an ineligible node is not a candidate",
			setup:    func(t *testing.T, s *Server, _ *api.Client) { must(t, s.SetNodeEligibility("worker-1", "ineligible")) },
			job:      func() *api.Job { return sandboxJob("j", "worker-1") },
			filtered: map[string]int{"${node.unique.name} = worker-1": 2},
		},
		{
			name: "a node without docker filters as missing drivers",
			cfg: func(c *Config) {
				c.Nodes[0].Drivers = map[string]bool{"docker": false, "raw_exec": true}
			},
			job:      func() *api.Job { return sandboxJob("j", "worker-1") },
			filtered: map[string]int{"${node.unique.name} = worker-1": 2, "missing drivers": 1},
		},
		{
			name: "regexp and set_contains constraints match node values",
			job: func() *api.Job {
				j := sandboxJob("j", "worker-1")
				j.Constrain(api.NewConstraint("${node.unique.id}", "regexp", "^[0-9a-f-]{36}$"))
				j.Constrain(api.NewConstraint("${attr.cpu.arch}", "set_contains", "arm64"))
				j.Constrain(api.NewConstraint("${attr.os.name}", "==", "ubuntu"))
				return j
			},
			nodes: []string{"worker-1"},
		},
		{
			name: "an unsupported operand fails its constraint",
			job: func() *api.Job {
				j := sandboxJob("j", "worker-1")
				j.Constrain(api.NewConstraint("${attr.kernel.version}", "version", ">= 6"))
				return j
			},
			filtered: map[string]int{"${node.unique.name} = worker-1": 2, "${attr.kernel.version} version >= 6": 1},
		},
		{
			name: "an arch mismatch filters every node",
			job: func() *api.Job {
				j := sandboxJob("j", "worker-1")
				j.Constraints[1].RTarget = "amd64"
				return j
			},
			filtered: map[string]int{"${attr.cpu.arch} = amd64": 3},
		},
		{
			name: "memory exhaustion is not a constraint filter",
			cfg:  func(c *Config) { c.Nodes[0].MemoryMB = 300 },
			setup: func(t *testing.T, _ *Server, c *api.Client) {
				runningAlloc(t, c, sandboxJob("first", "worker-1"))
			},
			job:      func() *api.Job { return sandboxJob("j", "worker-1") },
			filtered: map[string]int{"${node.unique.name} = worker-1": 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var muts []func(*Config)
			if tc.cfg != nil {
				muts = append(muts, tc.cfg)
			}
			s, _, c := newSim(t, muts...)
			if tc.setup != nil {
				tc.setup(t, s, c)
			}
			p := place(t, c, tc.job())
			if !reflect.DeepEqual(p.nodes, tc.nodes) {
				t.Errorf("placed on %v, want %v", p.nodes, tc.nodes)
			}
			if tc.filtered == nil {
				if p.filtered != nil || p.blocked != nil {
					t.Errorf("unexpected failure: %v", p.filtered)
				}
				return
			}
			if !reflect.DeepEqual(p.filtered, tc.filtered) {
				t.Errorf("ConstraintFiltered %v, want %v", p.filtered, tc.filtered)
			}
			if p.blocked == nil || p.blocked.Status != "blocked" || p.blocked.TriggeredBy != "queued-allocs" {
				t.Errorf("blocked eval %+v", p.blocked)
			}
			if p.status != "pending" {
				t.Errorf("job status %q, want pending", p.status)
			}
		})
	}
}

func TestMemoryExhaustionIsReportedAsADimension(t *testing.T) {
	t.Parallel()
	_, _, c := newSim(t, func(c *Config) { c.Nodes[0].MemoryMB = 300 })
	runningAlloc(t, c, sandboxJob("first", "worker-1"))
	resp := register(t, c, sandboxJob("second", "worker-1"))
	eval, _, _ := c.Evaluations().Info(resp.EvalID, nil)
	m := eval.FailedTGAllocs["sandbox"]
	if m == nil || m.NodesExhausted != 1 || m.DimensionExhausted["memory"] != 1 {
		t.Errorf("metric %+v", m)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCountIsHonouredAndSpreadAcrossNodes(t *testing.T) {
	t.Parallel()
	_, _, c := newSim(t)
	job := sandboxJob("many", "x")
	job.Constraints = job.Constraints[:2]
	*job.TaskGroups[0].Count = 3
	p := place(t, c, job)
	if len(p.nodes) != 3 {
		t.Fatalf("placed %v", p.nodes)
	}
	seen := map[string]bool{}
	for _, n := range p.nodes {
		seen[n] = true
	}
	if len(seen) != 3 {
		t.Errorf("allocations not spread: %v", p.nodes)
	}
	stubs, _, _ := c.Jobs().Allocations("many", false, nil)
	names := map[string]bool{}
	for _, a := range stubs {
		names[a.Name] = true
	}
	for _, n := range []string{"many.sandbox[0]", "many.sandbox[1]", "many.sandbox[2]"} {
		if !names[n] {
			t.Errorf("missing allocation %s in %v", n, names)
		}
	}
}

func TestAllocationGoesFromPendingToRunningAfterRunDelay(t *testing.T) {
	t.Parallel()
	_, _, c := newSim(t, func(c *Config) { c.RunDelay = 200_000_000 })
	p := place(t, c, sandboxJob("slow", "worker-1"))
	if len(p.nodes) != 1 {
		t.Fatalf("placed %v", p.nodes)
	}
	stubs, _, _ := c.Jobs().Allocations("slow", false, nil)
	if stubs[0].ClientStatus != "pending" || stubs[0].DesiredStatus != "run" {
		t.Errorf("fresh allocation %s/%s, want pending/run", stubs[0].ClientStatus, stubs[0].DesiredStatus)
	}
	if ts := stubs[0].TaskStates["sandbox"]; ts == nil || ts.State != "pending" {
		t.Errorf("fresh task state %+v", ts)
	}
	alloc := runningAlloc(t, c, sandboxJob("slow", "worker-1"))
	if ts := alloc.TaskStates["sandbox"]; ts.State != "running" || ts.StartedAt.IsZero() {
		t.Errorf("task state %+v", ts)
	}
	job, _, _ := c.Jobs().Info("slow", nil)
	if *job.Status != "running" {
		t.Errorf("job status %s", *job.Status)
	}
}

func TestBlockedEvaluationIsRetriedWhenTheNodeBecomesEligible(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	must(t, s.SetNodeEligibility("worker-1", "ineligible"))
	p := place(t, c, sandboxJob("waits", "worker-1"))
	if p.blocked == nil {
		t.Fatal("not blocked")
	}
	must(t, s.SetNodeEligibility("worker-1", "eligible"))
	stubs, _, _ := c.Jobs().Allocations("waits", false, nil)
	if len(stubs) != 1 || stubs[0].NodeName != "worker-1" || stubs[0].EvalID != p.blocked.ID {
		t.Fatalf("after eligibility: %+v", stubs)
	}
	e, _, _ := c.Evaluations().Info(p.blocked.ID, nil)
	if e.Status != "complete" {
		t.Errorf("blocked eval is %s after placement", e.Status)
	}
	sum, _, _ := c.Jobs().Summary("waits", nil)
	if sum.Summary["sandbox"].Queued != 0 {
		t.Errorf("summary %+v", sum.Summary)
	}
}

func TestANodeGoingDownLosesItsAllocations(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	alloc := runningAlloc(t, c, sandboxJob("lost", "worker-2"))
	must(t, s.SetNodeStatus("worker-2", "down"))
	a, _, _ := c.Allocations().Info(alloc.ID, nil)
	if a.ClientStatus != "lost" || a.DesiredStatus != "stop" {
		t.Errorf("alloc %s/%s, want lost/stop", a.ClientStatus, a.DesiredStatus)
	}
	// Nomad replaces a lost allocation; pinned to the down node, the
	// replacement is blocked and the job pending (real-lost-job-node-down.json).
	job, _, _ := c.Jobs().Info("lost", nil)
	if *job.Status != "pending" {
		t.Errorf("job status %s, want pending", *job.Status)
	}
	if err := s.SetNodeStatus("worker-2", "sideways"); err == nil {
		t.Error("invalid status accepted")
	}
	if err := s.SetNodeStatus("nope", "down"); err == nil {
		t.Error("unknown node accepted")
	}
}

// A client's reserved block is ReservedResources on the node, as a real
// agent reports it (node.json: NodeResources and ReservedResources), and the
// scheduler fits within NodeResources less it, as Nomad does.
func TestTheSchedulerFitsWithinResourcesLessReserved(t *testing.T) {
	t.Parallel()
	_, _, c := newSim(t, func(c *Config) { c.Nodes[0].CPUMHz, c.Nodes[0].ReservedCPUMHz = 1200, 300 })
	nodes, _, err := c.Nodes().List(nil)
	must(t, err)
	var id string
	for _, n := range nodes {
		if n.Name == "worker-1" {
			id = n.ID
		}
	}
	n, _, err := c.Nodes().Info(id, nil)
	must(t, err)
	if n.NodeResources.Cpu.CpuShares != 1200 || n.ReservedResources.Cpu.CpuShares != 300 {
		t.Fatalf("node resources %+v reserved %+v", n.NodeResources.Cpu, n.ReservedResources.Cpu)
	}
	runningAlloc(t, c, sandboxJob("first", "worker-1")) // 500 of the 900 allocatable
	resp := register(t, c, sandboxJob("second", "worker-1"))
	eval, _, _ := c.Evaluations().Info(resp.EvalID, nil)
	m := eval.FailedTGAllocs["sandbox"]
	if m == nil || m.NodesExhausted != 1 || m.DimensionExhausted["cpu"] != 1 {
		t.Errorf("metric %+v, want cpu exhausted (500 + 500 > 1200 - 300)", m)
	}
	allocs, _, err := c.Nodes().Allocations(id, nil)
	must(t, err)
	if len(allocs) != 1 || allocs[0].AllocatedResources.Tasks["sandbox"].Cpu.CpuShares != 500 {
		t.Fatalf("node allocations %+v", allocs)
	}
}
