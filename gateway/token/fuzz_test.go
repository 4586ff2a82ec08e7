package token

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify feeds Verify arbitrary strings. It must never panic, every
// refusal must be a *VerifyError for one of the four sentinels, and anything
// it accepts must be exactly what Mint produces for the claims it returns (so
// the seeds, verifying to the claims Mint returned): no other spelling of a
// token (re-encoded, padded, with stray bytes) and no other signer gets
// through.
func FuzzVerify(f *testing.F) {
	iss := newIssuer(f, testNow)
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
	for _, s := range []string{"", ".", "..", "a.b.c", "eyJ.eyJ.", "\x00\xff", strings.Repeat("A", MaxTokenSize+1)} {
		f.Add(s)
	}
	sentinels := []error{ErrMalformed, ErrExpired, ErrNotYetValid, ErrInvalid}

	f.Fuzz(func(t *testing.T, raw string) {
		c, err := iss.Verify(raw)
		if err == nil {
			// Mint signs its claims exactly like this, and Ed25519 is
			// deterministic: an accepted input must be byte for byte what
			// Mint produced for the claims Verify returned.
			again, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(testKey(1))
			if err != nil {
				t.Fatal(err)
			}
			if again != raw {
				t.Fatalf("Verify accepted %q, which is not Mint's encoding of its claims", raw)
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
