package wire

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
