package policies

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// AdmissionInput is the input of data.sandgate.admission.decision: the job
// exactly as it will be submitted, the node it is pinned to and the budget
// facts of that node.
type AdmissionInput struct {
	Now     int64        `json:"now,omitempty"` // unix seconds
	Sandbox SandboxFacts `json:"sandbox"`
	// Job is the api.Job marshalled to JSON, byte for byte what is submitted.
	Job    []byte    `json:"-"`
	Node   NodeFacts `json:"node"`
	Budget Budget    `json:"budget"`
	// Principal is who asks and what it holds (B3).
	Principal PrincipalFacts `json:"principal"`
	// NomadMounts are the mounts Nomad adds to the task on top of the job's
	// own (from data docker.task_dirs.mounts), so that a reviewer sees
	// them and H5 can require a quota for those on the host's disk. Nil is
	// left out of the document (INPUT).
	NomadMounts []NomadMount `json:"nomad_mounts,omitzero"`
}

// SandboxFacts is what the gateway intends: the policy checks the job against it.
type SandboxFacts struct {
	ID        string `json:"id,omitempty"`
	Profile   string `json:"profile,omitempty"`
	Network   string `json:"network,omitempty"`
	Principal string `json:"principal,omitempty"`
	CreatedAt int64  `json:"created_at,omitempty"`
	CeilingAt int64  `json:"ceiling_at,omitempty"`
}

// NodeFacts describes the Nomad client node a job is pinned to, with the
// operator's state for it. Nil usage means unknown, and the policy denies.
type NodeFacts struct {
	ID          string `json:"id,omitempty"`
	Name        string `json:"name,omitempty"`
	Status      string `json:"status,omitempty"`      // Nomad: ready, down, initializing
	Eligibility string `json:"eligibility,omitempty"` // Nomad: eligible, ineligible
	Drain       bool   `json:"drain"`
	// Attributes are Nomad's node attributes (kernel.name, cpu.arch, unique.hostname).
	Attributes map[string]string `json:"attributes"`
	Meta       map[string]string `json:"meta"`
	// ControlPlane is the gateway's verdict from Nomad server co-location; the
	// policy adds its own indicators (meta keys, names).
	ControlPlane  bool      `json:"control_plane"`
	OperatorState string    `json:"operator_state,omitempty"` // active, frozen, reserved, draining
	Enrollment    string    `json:"enrollment,omitempty"`     // none, sandbox, sandbox+egress
	Usage         NodeUsage `json:"usage"`
	// Capacity is what Nomad can allocate on the node and what holds it
	// now (B1). Nil is left out of the document, and B1 refuses a create or
	// an enrollment without it.
	Capacity *NodeCapacity `json:"capacity,omitempty"`
}

// NodeCapacity is a node's room as Nomad's scheduler counts it. Go sums the
// node's allocations (nomad.Client.NodeAllocated): Rego only compares.
type NodeCapacity struct {
	// Allocatable is the node's NodeResources less its ReservedResources.
	Allocatable Resources `json:"allocatable"`
	// Others is held by the non-terminal allocations of jobs without the
	// sandbox prefix (managed applications, another scheduler's jobs).
	Others Resources `json:"others"`
	// Sandboxes is held by the non-terminal allocations of prefixed jobs,
	// as Nomad sees them (a starting sandbox has none yet: budget.used
	// counts it).
	Sandboxes Resources `json:"sandboxes"`
}

// Resources are CPU (MHz) and memory (MB) figures.
type Resources struct {
	CPUMHz   int64 `json:"cpu_mhz"`
	MemoryMB int64 `json:"memory_mb"`
}

// NodeUsage is the node's resource use in percent.
type NodeUsage struct {
	MemoryPercent *float64 `json:"memory_percent,omitempty"`
	DiskPercent   *float64 `json:"disk_percent,omitempty"`
}

// PrincipalFacts are the creating principal's facts for its quota (B3).
type PrincipalFacts struct {
	Sub  string `json:"sub,omitempty"`
	Role string `json:"role,omitempty"` // operator or agent
	// LiveSandboxes counts the principal's live sandboxes, read in the same
	// store transaction that reserves the new one.
	LiveSandboxes int64 `json:"live_sandboxes"`
	// MaxLiveSandboxes is the quota of the principal's token; 0 means the
	// policy default (left out of the document).
	MaxLiveSandboxes int64 `json:"max_live_sandboxes,omitempty"`
}

// ID is the principal as records name their owner: role and subject
// together ("agent:ci"), so tokens of two roles never share ownership.
func (p PrincipalFacts) ID() string { return p.Role + ":" + p.Sub }

// Budget is a node's limits and what its live sandboxes use, excluding the
// sandbox being admitted. Go sums the live sandboxes (SumUse): Rego only
// compares.
type Budget struct {
	Limits BudgetLimits `json:"limits"`
	Used   BudgetUse    `json:"used"`
}

// BudgetLimits bound one node (B1).
type BudgetLimits struct {
	MaxSandboxes int64 `json:"max_sandboxes"`
	CPUMHz       int64 `json:"cpu_mhz"`
	MemoryMB     int64 `json:"memory_mb"`
}

// BudgetUse is what is in use on one node.
type BudgetUse struct {
	Sandboxes int64 `json:"sandboxes"`
	CPUMHz    int64 `json:"cpu_mhz"`
	MemoryMB  int64 `json:"memory_mb"`
}

// LiveSandbox is the reservation of one live sandbox.
type LiveSandbox struct {
	CPUMHz   int64
	MemoryMB int64
}

// SumUse adds up the reservations of live sandboxes.
func SumUse(live []LiveSandbox) BudgetUse {
	u := BudgetUse{Sandboxes: int64(len(live))}
	for _, s := range live {
		u.CPUMHz += s.CPUMHz
		u.MemoryMB += s.MemoryMB
	}
	return u
}

// Value builds the input document as an ast.Value. It fails only when Job
// is not a JSON object.
func (in *AdmissionInput) Value() (ast.Value, error) {
	o := ast.NewObjectWithCapacity(5)
	putInt(o, "now", in.Now)

	s := ast.NewObjectWithCapacity(6)
	putString(s, "id", in.Sandbox.ID)
	putString(s, "profile", in.Sandbox.Profile)
	putString(s, "network", in.Sandbox.Network)
	putString(s, "principal", in.Sandbox.Principal)
	putInt(s, "created_at", in.Sandbox.CreatedAt)
	putInt(s, "ceiling_at", in.Sandbox.CeilingAt)
	o.Insert(ast.InternedTerm("sandbox"), ast.NewTerm(s))

	if len(in.Job) > 0 {
		job, err := ParseInputBytes(in.Job)
		if err != nil {
			return nil, fmt.Errorf("policies: admission input job: %w", err)
		}
		o.Insert(ast.InternedTerm("job"), ast.NewTerm(job))
	}

	n := ast.NewObjectWithCapacity(12)
	putString(n, "id", in.Node.ID)
	putString(n, "name", in.Node.Name)
	putString(n, "status", in.Node.Status)
	putString(n, "eligibility", in.Node.Eligibility)
	n.Insert(ast.InternedTerm("drain"), ast.InternedTerm(in.Node.Drain))
	putStringMap(n, "attributes", in.Node.Attributes)
	putStringMap(n, "meta", in.Node.Meta)
	n.Insert(ast.InternedTerm("control_plane"), ast.InternedTerm(in.Node.ControlPlane))
	putString(n, "operator_state", in.Node.OperatorState)
	putString(n, "enrollment", in.Node.Enrollment)
	u := ast.NewObjectWithCapacity(2)
	putFloatPtr(u, "memory_percent", in.Node.Usage.MemoryPercent)
	putFloatPtr(u, "disk_percent", in.Node.Usage.DiskPercent)
	n.Insert(ast.InternedTerm("usage"), ast.NewTerm(u))
	if c := in.Node.Capacity; c != nil {
		n.Insert(ast.InternedTerm("capacity"), ast.ObjectTerm(
			ast.Item(ast.InternedTerm("allocatable"), c.Allocatable.term()),
			ast.Item(ast.InternedTerm("others"), c.Others.term()),
			ast.Item(ast.InternedTerm("sandboxes"), c.Sandboxes.term()),
		))
	}
	o.Insert(ast.InternedTerm("node"), ast.NewTerm(n))

	lim := ast.NewObject(
		ast.Item(ast.InternedTerm("max_sandboxes"), ast.InternedTerm(in.Budget.Limits.MaxSandboxes)),
		ast.Item(ast.InternedTerm("cpu_mhz"), ast.InternedTerm(in.Budget.Limits.CPUMHz)),
		ast.Item(ast.InternedTerm("memory_mb"), ast.InternedTerm(in.Budget.Limits.MemoryMB)),
	)
	used := ast.NewObject(
		ast.Item(ast.InternedTerm("sandboxes"), ast.InternedTerm(in.Budget.Used.Sandboxes)),
		ast.Item(ast.InternedTerm("cpu_mhz"), ast.InternedTerm(in.Budget.Used.CPUMHz)),
		ast.Item(ast.InternedTerm("memory_mb"), ast.InternedTerm(in.Budget.Used.MemoryMB)),
	)
	p := ast.NewObjectWithCapacity(4)
	putString(p, "sub", in.Principal.Sub)
	putString(p, "role", in.Principal.Role)
	p.Insert(ast.InternedTerm("live_sandboxes"), ast.InternedTerm(in.Principal.LiveSandboxes))
	if in.Principal.MaxLiveSandboxes > 0 {
		p.Insert(ast.InternedTerm("max_live_sandboxes"), ast.InternedTerm(in.Principal.MaxLiveSandboxes))
	}
	o.Insert(ast.InternedTerm("principal"), ast.NewTerm(p))

	if in.NomadMounts != nil {
		ms := make([]*ast.Term, 0, len(in.NomadMounts))
		for _, m := range in.NomadMounts {
			mo := ast.NewObjectWithCapacity(4)
			putString(mo, "target", m.Target)
			mo.Insert(ast.InternedTerm("host_disk"), ast.InternedTerm(m.HostDisk))
			mo.Insert(ast.InternedTerm("noexec"), ast.InternedTerm(m.NoExec))
			if m.TmpfsMB != 0 {
				mo.Insert(ast.InternedTerm("tmpfs_mb"), ast.InternedTerm(m.TmpfsMB))
			}
			ms = append(ms, ast.NewTerm(mo))
		}
		o.Insert(ast.InternedTerm("nomad_mounts"), ast.ArrayTerm(ms...))
	}

	o.Insert(ast.InternedTerm("budget"), ast.ObjectTerm(
		ast.Item(ast.InternedTerm("limits"), ast.NewTerm(lim)),
		ast.Item(ast.InternedTerm("used"), ast.NewTerm(used)),
	))
	return o, nil
}

func (r Resources) term() *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("cpu_mhz"), ast.InternedTerm(r.CPUMHz)),
		ast.Item(ast.InternedTerm("memory_mb"), ast.InternedTerm(r.MemoryMB)),
	)
}

// MarshalJSON writes the input document, the job included, as the policy
// sees it (`sandgate render --admission-input`).
func (in *AdmissionInput) MarshalJSON() ([]byte, error) {
	type plain AdmissionInput
	return json.Marshal(struct {
		*plain
		Job json.RawMessage `json:"job,omitempty"`
	}{(*plain)(in), json.RawMessage(in.Job)})
}
