package wire

// The request bodies. A pointer member tells absent from zero: the gateway
// decodes into them strictly (an unknown member is a 400 naming it) and the
// policy judges what was given; a client leaves out what it does not set.

// EnrollRequest is the body of PUT /v1/hosts/{node}/enrollment.
type EnrollRequest struct {
	// Egress also takes egress sandboxes (nil: false).
	Egress *bool `json:"egress,omitempty"`
	// Budget figures left nil take the policy default (node_budget_default).
	Budget *BudgetRequest `json:"budget,omitempty"`
}

// BudgetRequest holds the budget figures an enrollment sets.
type BudgetRequest struct {
	MaxSandboxes *int64 `json:"max_sandboxes,omitempty"`
	CPUMHz       *int64 `json:"cpu_mhz,omitempty"`
	MemoryMB     *int64 `json:"memory_mb,omitempty"`
}

// HostStateRequest is the body of POST /v1/hosts/{node}/state: one of the
// Host* states (required).
type HostStateRequest struct {
	State *string `json:"state"`
}

// ExtendRequest is the body of POST /v1/sandboxes/{id}/extend: the new
// expiry is now + TTLSeconds (required), capped at the ceiling.
type ExtendRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}
