package client

import "sandgate/gateway/wire"

// The API's objects, field for field as docs/api.md shows them. Times are
// the RFC 3339 UTC strings the gateway sends (empty when unset), kept as
// text so an object prints back exactly as it was received.

// Capabilities is GET /v1/capabilities (C1; wire.Capabilities); Has
// reports whether the gateway advertises a capability.
type Capabilities = wire.Capabilities

// Sandbox states.
const (
	StateStarting = wire.StateStarting
	StateRunning  = wire.StateRunning
	StateFailed   = wire.StateFailed
	StateEnded    = wire.StateEnded
)

// Sandbox is the sandbox object, as the gateway writes it (wire.Sandbox):
// Warnings holds the rules in warn mode the request violated.
type Sandbox = wire.Sandbox

// CreateRequest is the body of POST /v1/sandboxes (wire.CreateRequest):
// members left nil are left out, and the policy bundle's defaults apply.
// The Idempotency-Key is a header, not a member: CreateSandbox takes it as
// an option (WithIdempotencyKey).
type CreateRequest = wire.CreateRequest

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec
// (wire.ExecRequest): Argv is required; members left nil are left out,
// and the policy's defaults apply (timeout 60 s, output capped at
// exec.max_output_bytes).
type ExecRequest = wire.ExecRequest

// ExecResult is the answer of an exec (wire.ExecResult). A non-zero exit
// or a timeout is a result, not an error.
type ExecResult = wire.ExecResult

// LogsOptions select what Logs returns.
type LogsOptions struct {
	// Stream is "stdout" or "stderr"; empty means the gateway's default (stdout).
	Stream string
	// TailBytes is how many bytes from the end; 0 means the gateway's
	// default (and maximum), 64 KiB.
	TailBytes int64
}

// Host is a Nomad client node as sandgate sees it (wire.Host), with its
// budget, what its sandboxes hold of it, and its room as Nomad counts it.
type Host = wire.Host

// HostNomad is Nomad's view of a node (wire.HostNomad).
type HostNomad = wire.HostNomad

// HostUsage is the node's live memory and disk use (wire.HostUsage).
type HostUsage = wire.HostUsage

// HostBudget is a node's budget (B1) and what holds it (wire.HostBudget).
type HostBudget = wire.HostBudget

// BudgetLimits are a node's budget figures (wire.BudgetLimits).
type BudgetLimits = wire.BudgetLimits

// BudgetUsed is what the live sandboxes of a node hold (wire.BudgetUsed).
type BudgetUsed = wire.BudgetUsed

// NodeCapacity is what Nomad can allocate on a node and what holds it
// (wire.NodeCapacity).
type NodeCapacity = wire.NodeCapacity

// Resources are CPU (MHz) and memory (MB) figures (wire.Resources).
type Resources = wire.Resources

// Host states an operator sets.
const (
	HostActive   = wire.HostActive
	HostFrozen   = wire.HostFrozen
	HostReserved = wire.HostReserved
	HostDraining = wire.HostDraining
)

// EnrollRequest is the body of PUT /v1/hosts/{node}/enrollment
// (wire.EnrollRequest): Egress nil is false; budget figures left nil take
// the policy default.
type EnrollRequest = wire.EnrollRequest

// BudgetRequest holds the budget figures an enrollment sets
// (wire.BudgetRequest).
type BudgetRequest = wire.BudgetRequest

// HostChange is the answer of an unenrollment or a state change: the host
// and the sandboxes that were reclaimed on the way (R2; wire.HostChange).
type HostChange = wire.HostChange

// Token roles that the tokens API mints.
const (
	RoleOperator = "operator"
	RoleAgent    = "agent"
	RoleReviewer = "reviewer"
)

// Token is an operator or agent token's record (wire.Token); Token.Token,
// the secret, is in the mint answer only.
type Token = wire.Token

// Quota bounds an agent principal (B3), as a token's record answers it
// (wire.Quota); a mint asks for one with MintQuota.
type Quota = wire.Quota

// MintRequest is the body of POST /v1/tokens (wire.MintRequest): Role
// and TTLSeconds are required; Quota, for agents, nil takes the policy
// default.
type MintRequest = wire.MintRequest

// MintQuota is the quota a mint asks for an agent (B3; wire.MintQuota).
type MintQuota = wire.MintQuota

// Decision is one policy decision of the gateway's decision log
// (wire.Decision).
type Decision = wire.Decision

// DecisionPage is one page of the decision log, newest first
// (wire.DecisionPage).
type DecisionPage = wire.DecisionPage

// Policy is the policy bundle a gateway serves (GET /v1/policy; wire.Policy).
type Policy = wire.Policy

// DryRequest is a request as a caller would send it, for a dry run: the
// gateway builds its input with the live code and decides it
// (wire.DryRequest).
type DryRequest = wire.DryRequest

// DryClaims are the claims of the token a dry-run request would carry:
// Role is required; Scopes default to the role's, Exp to an hour from now,
// Active to true (wire.DryClaims).
type DryClaims = wire.DryClaims

// Evaluation is a dry run's decision and the input it was made on
// (wire.Evaluation).
type Evaluation = wire.Evaluation

// PolicyRule is one annotated rule of the bundle (wire.PolicyRule).
type PolicyRule = wire.PolicyRule
