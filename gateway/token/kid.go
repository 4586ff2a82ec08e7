package token

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
)

// MaxKeys is the most keys an Issuer verifies with: the active key and
// those being rotated in or out. It bounds the work a token without a kid
// costs (one Ed25519 verification per key, see Issuer.Verify).
const MaxKeys = 8

// KeyID returns the kid of pub: its RFC 7638 JWK thumbprint, the
// unpadded base64url SHA-256 of {"crv":"Ed25519","kty":"OKP","x":"<pub>"}
// (RFC 8037 names the members; RFC 7638 fixes their order and spelling).
// It is 43 characters of the base64url alphabet. Every replica computes
// the same kid from the same key without configuration, and the kid
// reveals nothing the public key does not.
func KeyID(pub ed25519.PublicKey) string {
	jwk := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// PrivateKeyID is KeyID of key's public half.
func PrivateKeyID(key ed25519.PrivateKey) string {
	return KeyID(key.Public().(ed25519.PublicKey)) //nolint:forcetypeassert // an ed25519.PrivateKey's public half is always an ed25519.PublicKey
}

// SelectActive splits keys into the one whose kid is activeKID (it signs)
// and the public halves of the others (they only verify), for
// Config.Key and Config.VerifyKeys. With a single key activeKID may be
// "": that key is active. It refuses (ErrKeySet) no keys, more than
// MaxKeys, a key given twice, an empty activeKID with several keys and an
// activeKID no key has.
func SelectActive(keys []ed25519.PrivateKey, activeKID string) (active ed25519.PrivateKey, verify []ed25519.PublicKey, err error) {
	switch {
	case len(keys) == 0:
		return nil, nil, fmt.Errorf("no keys: %w", ErrKeySet)
	case len(keys) > MaxKeys:
		return nil, nil, fmt.Errorf("%d keys, at most %d: %w", len(keys), MaxKeys, ErrKeySet)
	case activeKID == "" && len(keys) > 1:
		return nil, nil, fmt.Errorf("%d keys and no active kid: %w", len(keys), ErrKeySet)
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if len(k) != ed25519.PrivateKeySize {
			return nil, nil, fmt.Errorf("a key of %d bytes: %w", len(k), ErrKeySet)
		}
		kid := PrivateKeyID(k)
		if seen[kid] {
			return nil, nil, fmt.Errorf("key %s given twice: %w", kid, ErrKeySet)
		}
		seen[kid] = true
		if active == nil && (kid == activeKID || activeKID == "") {
			active = k
			continue
		}
		verify = append(verify, k.Public().(ed25519.PublicKey)) //nolint:forcetypeassert // as in PrivateKeyID
	}
	if active == nil {
		return nil, nil, fmt.Errorf("active kid %s is none of the %d keys: %w", activeKID, len(keys), ErrKeySet)
	}
	return active, verify, nil
}

// verifier is one key Verify accepts, with its kid.
type verifier struct {
	kid string
	pub ed25519.PublicKey
}

// keySet is an Issuer's keys: key signs, every key of all verifies.
type keySet struct {
	key ed25519.PrivateKey
	pub ed25519.PublicKey
	kid string // the active key's, in every minted header
	// all are the set, the active key first; byKID indexes them.
	all   []verifier
	byKID map[string]ed25519.PublicKey
}

// newKeySet checks and indexes the set of key (active) and verify. It
// refuses a key that is no Ed25519 private key, and (ErrKeySet) more than
// MaxKeys keys in all, a verification key of the wrong size and a key
// given twice.
func newKeySet(key ed25519.PrivateKey, verify []ed25519.PublicKey) (*keySet, error) {
	switch {
	case len(key) != ed25519.PrivateKeySize:
		return nil, fmt.Errorf("token: config: key has %d bytes, want an Ed25519 private key of %d", len(key), ed25519.PrivateKeySize)
	case !ed25519.NewKeyFromSeed(key.Seed()).Equal(key):
		return nil, errors.New("token: config: key's public half does not match its seed")
	case len(verify) >= MaxKeys:
		return nil, fmt.Errorf("token: config: %d verification keys and the active one, at most %d: %w", len(verify), MaxKeys, ErrKeySet)
	}
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok { // cannot happen for an ed25519.PrivateKey
		return nil, errors.New("token: config: key has no Ed25519 public half")
	}
	ks := &keySet{key: slices.Clone(key), pub: pub, kid: KeyID(pub), byKID: map[string]ed25519.PublicKey{}}
	ks.all = append(ks.all, verifier{kid: ks.kid, pub: pub})
	ks.byKID[ks.kid] = pub
	for _, v := range verify {
		if len(v) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("token: config: verification key has %d bytes, want %d: %w", len(v), ed25519.PublicKeySize, ErrKeySet)
		}
		kid := KeyID(v)
		if _, dup := ks.byKID[kid]; dup {
			return nil, fmt.Errorf("token: config: verification key %s given twice or equal to the active key: %w", kid, ErrKeySet)
		}
		v = slices.Clone(v)
		ks.all = append(ks.all, verifier{kid: kid, pub: v})
		ks.byKID[kid] = v
	}
	return ks, nil
}
