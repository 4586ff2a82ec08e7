package token

import "errors"

// Sentinel errors of Verify. Every error Verify returns is a *VerifyError
// that unwraps to exactly one of them.
var (
	// ErrMalformed: the input is not a JWT at all: too large, wrong number
	// of segments, characters outside base64url, bad base64 or bad JSON.
	ErrMalformed = errors.New("token: malformed")
	// ErrExpired: the signature is good but exp lies further in the past
	// than the leeway allows.
	ErrExpired = errors.New("token: expired")
	// ErrNotYetValid: the signature is good but nbf or iat lies further in
	// the future than the leeway allows.
	ErrNotYetValid = errors.New("token: not yet valid")
	// ErrInvalid: anything else: a bad signature, an algorithm other than
	// EdDSA (including "none"), a wrong issuer or audience, a missing
	// required claim, an unknown role, a session token without a sandbox.
	ErrInvalid = errors.New("token: invalid")
)

// Sentinel errors outside Verify.
var (
	// ErrInvalidRequest: Mint was asked for a token it must not issue (bad
	// role, empty subject, no lifetime, sandbox id on the wrong role).
	ErrInvalidRequest = errors.New("token: invalid mint request")
	// ErrKeyPermissions: the key file is readable or writable by group or
	// others, or is not a regular file.
	ErrKeyPermissions = errors.New("token: key file permissions too open")
	// ErrKeyInvalid: the key file is not a PEM "PRIVATE KEY" block holding
	// a PKCS#8 Ed25519 key.
	ErrKeyInvalid = errors.New("token: key file is not a PKCS#8 Ed25519 private key")
	// ErrKeySet: the keys given cannot form a key set: none, more than
	// MaxKeys, the same key twice, or an active kid that is not among
	// them (or, in a key directory, no ActiveFile).
	ErrKeySet = errors.New("token: key set invalid")
	// ErrKeyActive: the key to retire is the active one; activate another
	// first.
	ErrKeyActive = errors.New("token: key is the active key")
)

// VerifyError is the error Verify returns. Reason is a short, stable,
// human-readable detail that never contains the token or any attacker-chosen
// text; Err is one of ErrMalformed, ErrExpired, ErrNotYetValid or ErrInvalid.
type VerifyError struct {
	Reason string
	Err    error
}

// Error returns the sentinel's text followed by the reason.
func (e *VerifyError) Error() string {
	if e.Reason == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Reason
}

// Unwrap returns the sentinel, so errors.Is(err, ErrExpired) works.
func (e *VerifyError) Unwrap() error { return e.Err }

func verifyErr(sentinel error, reason string) *VerifyError {
	return &VerifyError{Reason: reason, Err: sentinel}
}
