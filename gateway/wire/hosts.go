package wire

// Host states an operator sets (POST /v1/hosts/{node}/state).
const (
	HostActive   = "active"
	HostFrozen   = "frozen"
	HostReserved = "reserved"
	HostDraining = "draining"
)

// Host is a Nomad client node as sandgate sees it (GET /v1/hosts, and the
// answer of an enrollment).
type Host struct {
	Name string `json:"name"`
	// ID and Datacenter are Nomad's; empty for a node Nomad no longer lists.
	ID         string `json:"id"`
	Datacenter string `json:"datacenter"`
	// Enrollment is "none" or the enrollment (placement.enrollments of the
	// bundle: sandbox, sandbox+egress).
	Enrollment string `json:"enrollment"`
	// State is the operator state, one of the Host* constants.
	State        string    `json:"state"`
	Nomad        HostNomad `json:"nomad"`
	OS           string    `json:"os"`
	Architecture string    `json:"architecture"`
	// ControlPlane: a control-plane indicator is present (P2).
	ControlPlane bool `json:"control_plane"`
	// Isolation is the isolation bundle version the node declares (I5).
	Isolation string `json:"isolation"`
	// Usage is nil when Nomad does not report the node's use.
	Usage         *HostUsage `json:"usage"`
	Budget        HostBudget `json:"budget"`
	LiveSandboxes int64      `json:"live_sandboxes"`
	UpdatedAt     string     `json:"updated_at"`
}

// HostNomad is Nomad's view of a node; Status is "missing" for a node the
// store knows and Nomad no longer lists.
type HostNomad struct {
	Status      string `json:"status"`
	Eligibility string `json:"eligibility"`
	Drain       bool   `json:"drain"`
}

// HostUsage is the node's live memory and disk use, in percent.
type HostUsage struct {
	MemoryPercent float64 `json:"memory_percent"`
	DiskPercent   float64 `json:"disk_percent"`
}

// HostBudget is a node's budget (B1), what live sandboxes hold of it, and
// the node's room as Nomad counts it.
type HostBudget struct {
	// Limits are the budget in force: the enrolled figures, or
	// node_budget_default for those not given, with cpu_mhz and memory_mb
	// clamped to what Nomad can still allocate to sandboxes on the node.
	Limits BudgetLimits `json:"limits"`
	Used   BudgetUsed   `json:"used"`
	// Capacity is the node's room as Nomad counts it (nil when its
	// allocations could not be read).
	Capacity *NodeCapacity `json:"capacity"`
	// Clamped names the figures (cpu_mhz, memory_mb) that were lowered to
	// that room: the enrolled or default figure exceeds it.
	Clamped []string `json:"clamped,omitempty"`
}

// BudgetLimits are a node's budget figures.
type BudgetLimits struct {
	MaxSandboxes int64 `json:"max_sandboxes"`
	CPUMHz       int64 `json:"cpu_mhz"`
	MemoryMB     int64 `json:"memory_mb"`
}

// BudgetUsed is what the live sandboxes of a node hold.
type BudgetUsed struct {
	Sandboxes int64 `json:"sandboxes"`
	CPUMHz    int64 `json:"cpu_mhz"`
	MemoryMB  int64 `json:"memory_mb"`
}

// NodeCapacity is what Nomad can allocate on a node and what holds it.
type NodeCapacity struct {
	// Allocatable is the node's resources less what it reserves.
	Allocatable Resources `json:"allocatable"`
	// Others is held by the allocations of other jobs.
	Others Resources `json:"others"`
	// Sandboxes is held by sandbox allocations, as Nomad sees them.
	Sandboxes Resources `json:"sandboxes"`
}

// Resources are CPU (MHz) and memory (MB) figures.
type Resources struct {
	CPUMHz   int64 `json:"cpu_mhz"`
	MemoryMB int64 `json:"memory_mb"`
}

// HostList is GET /v1/hosts: every node, ordered by name.
type HostList struct {
	Hosts []Host `json:"hosts"`
}

// HostChange is the answer of an unenrollment or a state change: the host
// and the sandboxes that were reclaimed on the way (R2).
type HostChange struct {
	Host      Host     `json:"host"`
	Reclaimed []string `json:"reclaimed"`
}
