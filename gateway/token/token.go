// Package token issues and verifies sandgate's bearer tokens: JWTs signed
// with Ed25519 (alg "EdDSA", and nothing else) through golang-jwt v5.
//
// Three roles exist. An operator token and an agent token are minted by an
// operator (rule T4); a session token is minted when a sandbox is created and
// is scoped to that one sandbox (rule T1). Verify checks the signature, the
// algorithm, iss, aud, exp, nbf and iat (with a bounded clock-skew leeway)
// and that jti, sub and a known role are present. It says nothing about what
// a token may do, whether it was revoked, or whether its sandbox has expired:
// the gateway decides that from the claims, the store and the policy
// (rules T2, T3, T4).
//
// Tokens are signed by one key and verified by a set of up to MaxKeys, so a
// key can be rotated without refusing live tokens: a new key is added for
// verification, then made active, and the old one retired once its tokens
// have expired. Every minted token names its key in the header (kid, the
// key's RFC 7638 thumbprint, KeyID). A key set lives in a key directory
// (ReadKeyDir, CreateKey, Activate, Retire) or, as before, in one key file
// (LoadOrCreateKey), a set of one.
//
// The raw token is shown to its holder once and never stored; the store
// keeps Digest(raw). No error from this package contains a token.
package token

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"github.com/golang-jwt/jwt/v5"
)

// Role is what kind of principal a token stands for.
type Role string

// The roles sandgate knows.
const (
	// RoleOperator is a human or automation with full control of the gateway.
	RoleOperator Role = "operator"
	// RoleAgent may create sandboxes within its quota; it is minted by an
	// operator.
	RoleAgent Role = "agent"
	// RoleSession is bound to one sandbox (Claims.SandboxID) and is minted
	// when that sandbox is created.
	RoleSession Role = "session"
	// RoleReviewer is a security reviewer: it reads the bundle in force
	// and the decision log and dry-runs and replays, and changes nothing.
	RoleReviewer Role = "reviewer"
)

// Valid reports whether r is one of the roles sandgate knows.
func (r Role) Valid() bool {
	switch r {
	case RoleOperator, RoleAgent, RoleSession, RoleReviewer:
		return true
	}
	return false
}

// Claims is the payload of a sandgate token. RegisteredClaims carries iss,
// sub, aud, exp, nbf, iat and jti; a verified token always has all of them.
type Claims struct {
	jwt.RegisteredClaims
	// Role is the principal's role; always valid in a verified token.
	Role Role `json:"role"`
	// Scopes narrow what the token may do; their meaning belongs to the
	// gateway and the policy (e.g. status, exec, logs, destroy for a session).
	Scopes []string `json:"scopes,omitempty"`
	// SandboxID is the one sandbox a session token is bound to; set for
	// RoleSession and only for it.
	SandboxID string `json:"sandbox_id,omitempty"`
	// Label is a free-text note for operators (e.g. "ci runner 3").
	Label string `json:"label,omitempty"`
}

// MaxTokenSize is the largest raw token Verify will look at, in bytes.
// Anything longer is refused with ErrMalformed before any decoding.
const MaxTokenSize = 8 << 10

// Digest returns the lowercase hex SHA-256 of the raw token: the only form
// of a token the store keeps (rule T1).
func Digest(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

// DigestEqual compares two digests in constant time (for equal lengths).
func DigestEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
