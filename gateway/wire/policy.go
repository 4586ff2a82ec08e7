package wire

import "encoding/json"

// Policy is the policy bundle a gateway serves (GET /v1/policy).
type Policy struct {
	Revision string `json:"revision"`
	// Digest identifies the bundle's files; DigestAlgorithm says how
	// (sha256-files-v2: the SHA-256 over the path and bytes of every file
	// OPA loads from the bundle; docs/policies.md).
	Digest          string `json:"digest"`
	DigestAlgorithm string `json:"digest_algorithm"`
	// LoadedAt is when the bundle was loaded, RFC 3339 with the
	// fraction of a second.
	LoadedAt string `json:"loaded_at"`
	// Signed says whether the bundle's signature was verified; Signer is
	// the key id that verified it.
	Signed bool   `json:"signed"`
	Signer string `json:"signer,omitempty"`
	// Rules are every annotated rule that can deny, sorted by entrypoint
	// and id, with its enforcement mode.
	Rules []PolicyRule `json:"rules"`
}

// PolicyRule is one annotated rule of the bundle.
type PolicyRule struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Severity    string `json:"severity"` // critical, high, medium or low
	Entrypoint  string `json:"entrypoint"`
	Location    string `json:"location"` // file:row in the bundle
	// Mode is how a violation is enforced: "deny" refuses the request,
	// "warn" and "dryrun" let it through.
	Mode string `json:"mode"`
}

// Evaluation is a dry run's decision and the input it was made on
// (POST /v1/policy/evaluate). Nothing was changed or logged as a decision.
type Evaluation struct {
	// Warnings are the rules in warn mode the evaluate request itself
	// violated; the gateway's JSON serializer puts the member first into
	// any object it answers (as on Sandbox).
	Warnings   []Violation `json:"warnings,omitempty"`
	Entrypoint string      `json:"entrypoint"`
	Allow      bool        `json:"allow"`
	Violations []Violation `json:"violations"`
	RuleIDs    []string    `json:"rule_ids"`
	DecisionID string      `json:"decision_id"`
	Revision   string      `json:"bundle_revision"`
	DurationUS int64       `json:"duration_us"`
	// Input is the document decided: the one given, or the one built.
	Input json.RawMessage `json:"input"`
	// DryRun is always true.
	DryRun bool `json:"dry_run"`
}

// EvaluateRequest is the body of POST /v1/policy/evaluate: either an
// entrypoint and its input document, or Request, a request as a caller
// would send it, whose input the gateway builds with the live code.
type EvaluateRequest struct {
	// Entrypoint is the decision to evaluate (authz, admission, ...).
	Entrypoint string          `json:"entrypoint,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Request    *DryRequest     `json:"request,omitempty"`
}

// DryRequest is "what would happen if this caller sent this".
type DryRequest struct {
	Method string `json:"method"`
	// Path is the request target, query included, e.g.
	// /v1/sandboxes/k7x2.../logs?stream=stdout.
	Path string `json:"path"`
	// TokenClaims are the claims of the token the request would carry;
	// a role is required.
	TokenClaims *DryClaims      `json:"token_claims"`
	Body        json.RawMessage `json:"body,omitempty"`
}

// DryClaims are the verified claims of the token a dry-run request would
// carry. Scopes default to what the gateway mints for the role, Exp to an
// hour from now, Active to true.
type DryClaims struct {
	Role      string    `json:"role"`
	Sub       string    `json:"sub,omitempty"`
	Scopes    *[]string `json:"scopes,omitempty"`
	SandboxID string    `json:"sandbox_id,omitempty"`
	Exp       int64     `json:"exp,omitempty"`
	JTI       string    `json:"jti,omitempty"`
	Active    *bool     `json:"active,omitempty"`
}
