package token

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testNow is the fixed clock of every test issuer.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testKey is a deterministic key, so fuzz crashers stay reproducible.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// newIssuer returns an issuer with the default config, testKey(1) and a
// clock fixed at now.
func newIssuer(tb testing.TB, now time.Time) *Issuer {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Key = testKey(1)
	cfg.Now = func() time.Time { return now }
	iss, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return iss
}

// mint mints req with iss or fails the test.
func mint(tb testing.TB, iss *Issuer, req MintRequest) (string, Claims) {
	tb.Helper()
	raw, c, err := iss.Mint(req)
	if err != nil {
		tb.Fatalf("Mint(%+v): %v", req, err)
	}
	return raw, c
}

// baseClaims are the claims of a token Verify accepts at testNow, as a map so
// a case can delete or change any one of them.
func baseClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss":  "sandgate",
		"aud":  []string{"sandgate-api"},
		"sub":  "agent:ci",
		"role": "agent",
		"jti":  "JTI0123456789ABCDEFGHIJKLM",
		"iat":  testNow.Unix(),
		"nbf":  testNow.Unix(),
		"exp":  testNow.Add(time.Hour).Unix(),
	}
}

// handMade signs baseClaims, changed by mutate, with key and alg EdDSA.
func handMade(tb testing.TB, key ed25519.PrivateKey, mutate func(jwt.MapClaims)) string {
	tb.Helper()
	c := baseClaims()
	if mutate != nil {
		mutate(c)
	}
	raw, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(key)
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	return raw
}

// checkVerifyError asserts err is a *VerifyError for want whose text does not
// leak raw.
func checkVerifyError(tb testing.TB, err error, want error, raw string) {
	tb.Helper()
	if !errors.Is(err, want) {
		tb.Fatalf("err = %v, want %v", err, want)
	}
	var ve *VerifyError
	if !errors.As(err, &ve) {
		tb.Fatalf("err %T is not a *VerifyError", err)
	}
	if ve.Reason == "" {
		tb.Errorf("VerifyError %v has an empty Reason", err)
	}
	for _, seg := range strings.Split(raw, ".") {
		if len(seg) >= 8 && strings.Contains(err.Error(), seg) {
			tb.Errorf("error %q contains part of the token", err)
		}
	}
}

// newSetIssuer returns an issuer at testNow signing with active and
// verifying with active and others too.
func newSetIssuer(tb testing.TB, active ed25519.PrivateKey, others ...ed25519.PrivateKey) *Issuer {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Key = active
	for _, o := range others {
		cfg.VerifyKeys = append(cfg.VerifyKeys, o.Public().(ed25519.PublicKey))
	}
	cfg.Now = func() time.Time { return testNow }
	iss, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return iss
}

// withHeader signs baseClaims with key under a header of alg EdDSA, typ JWT
// and the members of extra (a nil value deletes the member).
func withHeader(tb testing.TB, key ed25519.PrivateKey, extra map[string]any) string {
	tb.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, baseClaims())
	for k, v := range extra {
		if v == nil {
			delete(tok.Header, k)
			continue
		}
		tok.Header[k] = v
	}
	raw, err := tok.SignedString(key)
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	return raw
}
