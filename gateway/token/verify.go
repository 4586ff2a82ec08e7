package token

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// errCritHeader is returned by keyFunc for a token that asks for JWS
// extensions (RFC 7515 §4.1.11) that sandgate does not implement.
var errCritHeader = errors.New("crit header")

// errUnknownKID is returned by keyFunc for a kid that names no key of the
// set (or is not a string).
var errUnknownKID = errors.New("unknown kid")

// Verify checks raw and returns its claims. It accepts only a token signed by
// a key of this Issuer's set with alg EdDSA, with the configured iss and aud, exp, nbf
// and iat within the leeway, a jti, a sub and a valid role; a session token
// must name its sandbox and no other role may. On failure the claims are
// zero and the error is a *VerifyError matching ErrMalformed, ErrExpired,
// ErrNotYetValid or ErrInvalid.
//
// The key is the one the header's kid names; a kid that names no key of the
// set (one never known, or retired) is refused with ErrInvalid, whatever
// the signature. A token without a kid (minted before tokens carried one)
// is accepted when a key of the set verifies it: every key of the set is
// tried, the active one first, at most MaxKeys. A kid only selects a key;
// the signature of a trusted key is what authenticates, so this accepts
// nothing a kid would refuse, and a retired key's tokens are refused with
// or without one.
//
// Verify does not know about revocation or sandbox expiry; the caller checks
// the token's record (by Digest or jti) and the sandbox itself.
func (i *Issuer) Verify(raw string) (Claims, error) {
	if err := wellFormed(raw); err != nil {
		return Claims{}, err
	}
	var c Claims
	// One set for the whole verification, even if SetKeys runs meanwhile.
	ks := i.keys.Load()
	tok, err := i.parser.ParseWithClaims(raw, &c, ks.keyFunc)
	if err != nil {
		return Claims{}, i.classify(err, tok, &c)
	}
	if err := checkClaims(&c); err != nil {
		return Claims{}, err
	}
	if err := numericTimes(raw); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// numericTimes refuses a payload whose exp, nbf or iat is not a JSON number
// (RFC 7519 NumericDate). golang-jwt also reads a numeric string such as
// "9999999999"; sandgate never mints one, and a token keeps one accepted
// spelling. raw has been parsed and verified, so its payload decodes.
func numericTimes(raw string) error {
	_, rest, _ := strings.Cut(raw, ".")
	payload, _, _ := strings.Cut(rest, ".")
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return verifyErr(ErrMalformed, "bad base64 or JSON")
	}
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(b, &claims); err != nil {
		return verifyErr(ErrMalformed, "bad base64 or JSON")
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		v, ok := claims[name]
		if !ok {
			continue
		}
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
			return verifyErr(ErrInvalid, "claim "+name+" is not a number")
		}
	}
	return nil
}

// wellFormed refuses input before any decoding: too large, or holding a byte
// outside the base64url alphabet and the two dots. The alphabet check also
// closes the gap base64 leaves open (decoders skip CR and LF), so a token
// has exactly one accepted spelling and one Digest.
func wellFormed(raw string) error {
	if len(raw) > MaxTokenSize {
		return verifyErr(ErrMalformed, "larger than 8 KiB")
	}
	if raw == "" {
		return verifyErr(ErrMalformed, "empty")
	}
	for j := 0; j < len(raw); j++ {
		b := raw[j]
		switch {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '-', b == '_', b == '.':
		default:
			return verifyErr(ErrMalformed, "character outside base64url")
		}
	}
	if strings.Count(raw, ".") != 2 {
		return verifyErr(ErrMalformed, "not three dot-separated segments")
	}
	return nil
}

// keyFunc hands the parser the public key the header's kid names, after a
// second, independent check that the algorithm is EdDSA (WithValidMethods
// is the first). Without a kid it hands over the whole set, active key
// first, and the parser tries each.
func (ks *keySet) keyFunc(t *jwt.Token) (any, error) {
	if _, ok := t.Method.(*jwt.SigningMethodEd25519); !ok {
		return nil, jwt.ErrTokenSignatureInvalid
	}
	if _, ok := t.Header["crit"]; ok {
		return nil, errCritHeader
	}
	if v, ok := t.Header["kid"]; ok {
		kid, _ := v.(string)
		pub, known := ks.byKID[kid]
		if !known {
			return nil, errUnknownKID
		}
		return pub, nil
	}
	if len(ks.all) == 1 {
		return ks.pub, nil
	}
	set := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, len(ks.all))}
	for j, v := range ks.all {
		set.Keys[j] = v.pub
	}
	return set, nil
}

// classify maps a golang-jwt error to one sentinel with a fixed-vocabulary
// reason; golang-jwt's own messages can echo header values, so they are not
// passed on. c is trustworthy only when err is a claims error, which the
// parser reports only after the signature verified.
func (i *Issuer) classify(err error, tok *jwt.Token, c *Claims) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return verifyErr(ErrMalformed, "bad base64 or JSON")
	case errors.Is(err, errCritHeader):
		return verifyErr(ErrInvalid, "unsupported crit header")
	case errors.Is(err, errUnknownKID):
		return verifyErr(ErrInvalid, "unknown key id")
	case tok != nil && tok.Method != nil && tok.Method.Alg() != jwt.SigningMethodEdDSA.Alg():
		return verifyErr(ErrInvalid, "signing method not allowed")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return verifyErr(ErrInvalid, "signing method missing or unknown")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return verifyErr(ErrInvalid, "signature invalid")
	case !errors.Is(err, jwt.ErrTokenInvalidClaims):
		return verifyErr(ErrInvalid, "unverifiable")
	}

	// The signature is good. A structural fault outranks a timing one: a
	// token we would never mint is invalid, whatever its times say.
	switch {
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return verifyErr(ErrInvalid, "missing required claim "+missingRegistered(c))
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return verifyErr(ErrInvalid, "issuer not accepted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return verifyErr(ErrInvalid, "audience not accepted")
	}
	if err := checkClaims(c); err != nil {
		return err
	}
	leeway := " (leeway " + i.cfg.Leeway.String() + ")"
	switch {
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return verifyErr(ErrNotYetValid, "nbf "+stamp(c.NotBefore)+" is in the future"+leeway)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return verifyErr(ErrNotYetValid, "iat "+stamp(c.IssuedAt)+" is in the future"+leeway)
	case errors.Is(err, jwt.ErrTokenExpired):
		return verifyErr(ErrExpired, "exp "+stamp(c.ExpiresAt)+" has passed"+leeway)
	}
	return verifyErr(ErrInvalid, "claims invalid")
}

// checkClaims enforces what golang-jwt does not: jti, iat, sub and a known
// role; a sandbox id exactly on session tokens; exp after iat.
func checkClaims(c *Claims) error {
	switch {
	case c.ID == "":
		return verifyErr(ErrInvalid, "missing required claim jti")
	case c.IssuedAt == nil:
		return verifyErr(ErrInvalid, "missing required claim iat")
	case c.Subject == "":
		return verifyErr(ErrInvalid, "missing required claim sub")
	case c.Role == "":
		return verifyErr(ErrInvalid, "missing required claim role")
	case !c.Role.Valid():
		return verifyErr(ErrInvalid, "unknown role")
	case c.Role == RoleSession && c.SandboxID == "":
		return verifyErr(ErrInvalid, "session token without sandbox_id")
	case c.Role != RoleSession && c.SandboxID != "":
		return verifyErr(ErrInvalid, string(c.Role)+" token with sandbox_id")
	case c.ExpiresAt != nil && !c.ExpiresAt.After(c.IssuedAt.Time):
		return verifyErr(ErrInvalid, "exp not after iat")
	}
	return nil
}

// missingRegistered names the first registered claim golang-jwt requires
// that c lacks.
func missingRegistered(c *Claims) string {
	switch {
	case c.ExpiresAt == nil:
		return "exp"
	case c.NotBefore == nil:
		return "nbf"
	case c.Issuer == "":
		return "iss"
	case len(c.Audience) == 0 || len(c.Audience) == 1 && c.Audience[0] == "":
		return "aud"
	}
	return "(unknown)"
}

func stamp(d *jwt.NumericDate) string {
	if d == nil {
		return "(none)"
	}
	return d.UTC().Format(time.RFC3339)
}
