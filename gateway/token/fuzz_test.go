package token

import (
	"crypto/ed25519"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify feeds Verify, on a set of two keys (testKey(1) active,
// testKey(3) verifying), arbitrary strings. It must never panic, every
// refusal must be a *VerifyError for one of the four sentinels, and anything
// it accepts must be exactly what a key of the set signs for the claims it
// returns, under Mint's header (with that key's kid) or the header of a
// token minted before kids (so the seeds verify to the claims Mint
// returned): no other spelling of a token (re-encoded, padded, with stray
// bytes, another kid) and no other signer gets through.
func FuzzVerify(f *testing.F) {
	iss := newSetIssuer(f, testKey(1), testKey(3))
	minted := map[string]Claims{}
	for _, req := range []MintRequest{
		{Role: RoleOperator, Subject: "op:alice", TTL: time.Hour, Label: "laptop"},
		{Role: RoleSession, Subject: "agent:ci", SandboxID: "sbx-1", Scopes: []string{"status", "exec"}, TTL: time.Hour},
	} {
		raw, c := mint(f, iss, req)
		minted[raw] = c
		f.Add(raw)
		for _, n := range []int{1, 2, 10, len(raw) / 2, strings.LastIndexByte(raw, '.') + 1, strings.IndexByte(raw, '.')} {
			f.Add(raw[:len(raw)-n])
		}
		f.Add(raw + "A")
		f.Add(strings.Replace(raw, ".", "..", 1))
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, baseClaims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(none)
	f.Add(handMade(f, testKey(2), nil))
	// kid headers on claims as Mint encodes them: none (a token minted
	// before kids), each key's own, a swapped one, an unknown one, one of
	// the wrong type.
	var claims Claims
	for _, c := range minted {
		claims = c
		break
	}
	kid1, kid3 := PrivateKeyID(testKey(1)), PrivateKeyID(testKey(3))
	for _, seed := range []struct {
		key ed25519.PrivateKey
		kid any
	}{
		{testKey(1), nil}, {testKey(3), nil}, {testKey(2), nil},
		{testKey(1), kid1}, {testKey(3), kid3}, {testKey(1), kid3}, {testKey(3), kid1},
		{testKey(2), PrivateKeyID(testKey(2))}, {testKey(1), ""}, {testKey(1), 1}, {testKey(1), []string{kid1}},
	} {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
		if seed.kid != nil {
			tok.Header["kid"] = seed.kid
		}
		raw, err := tok.SignedString(seed.key)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{"", ".", "..", "a.b.c", "eyJ.eyJ.", "\x00\xff", strings.Repeat("A", MaxTokenSize+1)} {
		f.Add(s)
	}
	sentinels := []error{ErrMalformed, ErrExpired, ErrNotYetValid, ErrInvalid}

	f.Fuzz(func(t *testing.T, raw string) {
		c, err := iss.Verify(raw)
		if err == nil {
			// Mint signs its claims exactly like this, and Ed25519 is
			// deterministic: an accepted input must be byte for byte what
			// a key of the set signs for the claims Verify returned.
			if !slices.Contains(spellings(t, c), raw) {
				t.Fatalf("Verify accepted %q, which no key of the set signs so for its claims", raw)
			}
			// Fuzz workers run this setup again with fresh jtis, so the
			// seeds are only known in the process that minted them.
			if want, ok := minted[raw]; ok && !reflect.DeepEqual(c, want) {
				t.Fatalf("Verify claims %+v, Mint claims %+v", c, want)
			}
			return
		}
		var ve *VerifyError
		if !errors.As(err, &ve) {
			t.Fatalf("err %T is not a *VerifyError: %v", err, err)
		}
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("err %v matches %d sentinels, want 1", err, n)
		}
		if strings.Count(raw, ".") == 2 && len(raw) >= 16 && strings.Contains(err.Error(), raw) {
			t.Fatalf("error message contains the token")
		}
		if !reflect.DeepEqual(c, Claims{}) {
			t.Fatalf("refused Verify returned claims %+v", c)
		}
	})
}

// spellings are the tokens the fuzz target's set accepts for c: c signed by
// testKey(1) or testKey(3), under Mint's header with that key's kid or
// under the header without kid of a token minted before kids.
func spellings(t *testing.T, c Claims) []string {
	t.Helper()
	var out []string
	for _, key := range []ed25519.PrivateKey{testKey(1), testKey(3)} {
		for _, kid := range []any{PrivateKeyID(key), nil} {
			tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
			if kid != nil {
				tok.Header["kid"] = kid
			}
			raw, err := tok.SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, raw)
		}
	}
	return out
}
