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

// CreateRequest is the body of POST /v1/sandboxes. Every member is
// optional: the policy bundle's defaults apply to what is left out.
type CreateRequest struct {
	Profile    *string           `json:"profile,omitempty"`
	Network    *string           `json:"network,omitempty"`
	TTLSeconds *int64            `json:"ttl_seconds,omitempty"`
	Node       *string           `json:"node,omitempty"`
	CPUMHz     *int64            `json:"cpu_mhz,omitempty"`
	MemoryMB   *int64            `json:"memory_mb,omitempty"`
	Image      *string           `json:"image,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// WaitSeconds is how long the create waits for the allocation to run
	// (nil: the gateway's default, 30 s; 0: answer at once).
	WaitSeconds *int64 `json:"wait_seconds,omitempty"`
	// ReissueToken asks a create repeated with its Idempotency-Key for a
	// fresh session token, revoking the old one (T4).
	ReissueToken *bool `json:"reissue_token,omitempty"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	// Argv is the argument vector (required); no shell runs unless argv
	// names one.
	Argv []string `json:"argv"`
	// Stdin is text written to the command, then closed; nil sends none.
	Stdin *string `json:"stdin,omitempty"`
	// StdinBase64 is stdin as standard base64, for bytes that are not
	// UTF-8 text; at most one of Stdin and StdinBase64.
	StdinBase64 *string `json:"stdin_base64,omitempty"`
	// TimeoutSeconds: nil takes the policy's default (E2).
	TimeoutSeconds *int64            `json:"timeout_seconds,omitempty"`
	Workdir        *string           `json:"workdir,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr below the policy's
	// exec.max_output_bytes (E2), which is also the default.
	MaxOutputBytes *int64 `json:"max_output_bytes,omitempty"`
}

// MintRequest is the body of POST /v1/tokens: Role and TTLSeconds are
// required (sent as null when nil); the rest is left out when nil.
type MintRequest struct {
	Role       *string `json:"role"`
	TTLSeconds *int64  `json:"ttl_seconds"`
	Label      *string `json:"label,omitempty"`
	// Subject: nil takes a generated one.
	Subject *string `json:"subject,omitempty"`
	// Quota is for agents; nil takes the policy default (B3).
	Quota *MintQuota `json:"quota,omitempty"`
}

// MintQuota is the quota a mint asks for an agent (B3). Unlike Quota, the
// one a token's record answers, its figure is a pointer: the gateway
// tells a quota that names none from one that names 0.
type MintQuota struct {
	MaxLiveSandboxes *int64 `json:"max_live_sandboxes,omitempty"`
}
