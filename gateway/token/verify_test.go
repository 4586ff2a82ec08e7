package token

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestVerifyAccepts(t *testing.T) {
	t.Parallel()
	key := testKey(1)
	tests := []struct {
		name string
		raw  func(t *testing.T) string
		now  time.Time
	}{
		{"a hand-made token with every required claim", func(t *testing.T) string {
			return handMade(t, key, nil)
		}, testNow},
		{"a token expired by 29s, inside the leeway", func(t *testing.T) string {
			return handMade(t, key, nil)
		}, testNow.Add(time.Hour + 29*time.Second)},
		{"a token issued 29s in the future, inside the leeway", func(t *testing.T) string {
			return handMade(t, key, func(c jwt.MapClaims) { c["iat"] = testNow.Add(29 * time.Second).Unix() })
		}, testNow},
		{"a token valid from 29s in the future, inside the leeway", func(t *testing.T) string {
			return handMade(t, key, func(c jwt.MapClaims) { c["nbf"] = testNow.Add(29 * time.Second).Unix() })
		}, testNow},
		{"an audience given as a single string", func(t *testing.T) string {
			return handMade(t, key, func(c jwt.MapClaims) { c["aud"] = "sandgate-api" })
		}, testNow},
		{"an audience list that includes ours", func(t *testing.T) string {
			return handMade(t, key, func(c jwt.MapClaims) { c["aud"] = []string{"other", "sandgate-api"} })
		}, testNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := newIssuer(t, tt.now).Verify(tt.raw(t)); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid, _ := mint(t, newIssuer(t, testNow), MintRequest{Role: RoleAgent, Subject: "agent:ci", TTL: time.Hour})
	seg := strings.Split(valid, ".")
	sig, err := base64.RawURLEncoding.DecodeString(seg[2])
	if err != nil {
		t.Fatal(err)
	}

	signed := func(method jwt.SigningMethod, key any) func(t *testing.T) string {
		return func(t *testing.T) string {
			raw, err := jwt.NewWithClaims(method, baseClaims()).SignedString(key)
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			return raw
		}
	}
	mutated := func(mutate func(jwt.MapClaims)) func(t *testing.T) string {
		return func(t *testing.T) string { return handMade(t, key, mutate) }
	}
	literal := func(s string) func(t *testing.T) string {
		return func(*testing.T) string { return s }
	}
	enc := base64.RawURLEncoding.EncodeToString

	tests := []struct {
		name string
		raw  func(t *testing.T) string
		now  time.Time // zero: testNow
		want error
	}{
		// Not a JWT.
		{"an empty string", literal(""), time.Time{}, ErrMalformed},
		{"a word", literal("hello"), time.Time{}, ErrMalformed},
		{"two segments", literal("a.b"), time.Time{}, ErrMalformed},
		{"four segments", literal(valid + ".x"), time.Time{}, ErrMalformed},
		{"only dots", literal(".."), time.Time{}, ErrMalformed},
		{"a Bearer prefix left on", literal("Bearer " + valid), time.Time{}, ErrMalformed},
		{"a newline inside the signature", literal(seg[0] + "." + seg[1] + "." + seg[2][:10] + "\n" + seg[2][10:]), time.Time{}, ErrMalformed},
		{"base64 padding", literal(valid + "=="), time.Time{}, ErrMalformed},
		{"non-ASCII bytes", literal("ey\u00e9.ey.sig"), time.Time{}, ErrMalformed},
		{"a header that is not JSON", literal(enc([]byte("{nope")) + "." + seg[1] + "." + seg[2]), time.Time{}, ErrMalformed},
		{"a claim of the wrong type", mutated(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }), time.Time{}, ErrMalformed},
		// golang-jwt reads a numeric string as a NumericDate; sandgate does not.
		{"exp as a numeric string", mutated(func(c jwt.MapClaims) { c["exp"] = "9999999999" }), time.Time{}, ErrInvalid},
		{"nbf as a numeric string", mutated(func(c jwt.MapClaims) { c["nbf"] = fmt.Sprint(testNow.Unix() - 60) }), time.Time{}, ErrInvalid},
		{"iat as a numeric string", mutated(func(c jwt.MapClaims) { c["iat"] = fmt.Sprint(testNow.Unix() - 60) }), time.Time{}, ErrInvalid},
		{"more than 8 KiB of garbage", literal(strings.Repeat("a", MaxTokenSize+1)), time.Time{}, ErrMalformed},
		{"a properly signed token over 8 KiB", mutated(func(c jwt.MapClaims) {
			c["label"] = strings.Repeat("x", MaxTokenSize)
		}), time.Time{}, ErrMalformed},

		// Not ours.
		{"alg none", signed(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType), time.Time{}, ErrInvalid},
		{"alg none with our signature kept", literal(enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + seg[1] + "." + seg[2]), time.Time{}, ErrInvalid},
		{"HS256 keyed with the public key bytes", signed(jwt.SigningMethodHS256, []byte(pub)), time.Time{}, ErrInvalid},
		{"HS256 keyed with the public key PEM", signed(jwt.SigningMethodHS256, pubPEM), time.Time{}, ErrInvalid},
		{"an unknown alg", literal(enc([]byte(`{"alg":"XX999","typ":"JWT"}`)) + "." + seg[1] + "." + seg[2]), time.Time{}, ErrInvalid},
		{"no alg", literal(enc([]byte(`{"typ":"JWT"}`)) + "." + seg[1] + "." + seg[2]), time.Time{}, ErrInvalid},
		{"a signature from another key", func(t *testing.T) string { return handMade(t, testKey(2), nil) }, time.Time{}, ErrInvalid},
		{"a payload tampered to another role", literal(seg[0] + "." + enc(tamper(t, seg[1], "agent", "operator")) + "." + seg[2]), time.Time{}, ErrInvalid},
		{"a header tampered with a kid", literal(enc([]byte(`{"alg":"EdDSA","kid":"x","typ":"JWT"}`)) + "." + seg[1] + "." + seg[2]), time.Time{}, ErrInvalid},
		{"an empty signature", literal(seg[0] + "." + seg[1] + "."), time.Time{}, ErrInvalid},
		{"a signature one byte short", literal(seg[0] + "." + seg[1] + "." + enc(sig[:len(sig)-1])), time.Time{}, ErrInvalid},
		{"a signature re-spelled with non-zero padding bits", literal(valid[:len(valid)-1] + string(base64URL[strings.IndexByte(base64URL, valid[len(valid)-1])^1])), time.Time{}, ErrMalformed},
		{"a crit header", func(t *testing.T) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, baseClaims())
			tok.Header["crit"] = []string{"exp"}
			raw, err := tok.SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}, time.Time{}, ErrInvalid},

		// Ours, but wrong claims.
		{"a wrong issuer", mutated(func(c jwt.MapClaims) { c["iss"] = "someone-else" }), time.Time{}, ErrInvalid},
		{"a wrong audience", mutated(func(c jwt.MapClaims) { c["aud"] = []string{"nomad"} }), time.Time{}, ErrInvalid},
		{"no issuer", mutated(func(c jwt.MapClaims) { delete(c, "iss") }), time.Time{}, ErrInvalid},
		{"no audience", mutated(func(c jwt.MapClaims) { delete(c, "aud") }), time.Time{}, ErrInvalid},
		{"no exp", mutated(func(c jwt.MapClaims) { delete(c, "exp") }), time.Time{}, ErrInvalid},
		{"no nbf", mutated(func(c jwt.MapClaims) { delete(c, "nbf") }), time.Time{}, ErrInvalid},
		{"no jti", mutated(func(c jwt.MapClaims) { delete(c, "jti") }), time.Time{}, ErrInvalid},
		{"no iat", mutated(func(c jwt.MapClaims) { delete(c, "iat") }), time.Time{}, ErrInvalid},
		{"no sub", mutated(func(c jwt.MapClaims) { delete(c, "sub") }), time.Time{}, ErrInvalid},
		{"no role", mutated(func(c jwt.MapClaims) { delete(c, "role") }), time.Time{}, ErrInvalid},
		{"an unknown role", mutated(func(c jwt.MapClaims) { c["role"] = "admin" }), time.Time{}, ErrInvalid},
		{"a session token without sandbox_id", mutated(func(c jwt.MapClaims) { c["role"] = "session" }), time.Time{}, ErrInvalid},
		{"an operator token with sandbox_id", mutated(func(c jwt.MapClaims) {
			c["role"], c["sandbox_id"] = "operator", "sbx-1"
		}), time.Time{}, ErrInvalid},
		{"exp before iat", mutated(func(c jwt.MapClaims) {
			c["iat"], c["nbf"], c["exp"] = testNow.Unix(), testNow.Unix(), testNow.Add(-time.Second).Unix()
		}), testNow.Add(-5 * time.Second), ErrInvalid},
		{"an expired token from the wrong issuer is invalid, not expired", mutated(func(c jwt.MapClaims) { c["iss"] = "x" }),
			testNow.Add(2 * time.Hour), ErrInvalid},

		// Ours, but outside its time window.
		{"a token expired by 31s, beyond the leeway", mutated(nil), testNow.Add(time.Hour + 31*time.Second), ErrExpired},
		{"a minted token a day after it expired", literal(valid), testNow.Add(25 * time.Hour), ErrExpired},
		{"a token issued 31s in the future", mutated(func(c jwt.MapClaims) { c["iat"] = testNow.Add(31 * time.Second).Unix() }),
			time.Time{}, ErrNotYetValid},
		{"a token valid only from 31s in the future", mutated(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(31 * time.Second).Unix() }),
			time.Time{}, ErrNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := tt.now
			if now.IsZero() {
				now = testNow
			}
			raw := tt.raw(t)
			c, err := newIssuer(t, now).Verify(raw)
			checkVerifyError(t, err, tt.want, raw)
			t.Logf("refused: %v", err)
			if c.Role != "" || c.Subject != "" || c.ID != "" {
				t.Errorf("refused Verify returned claims %+v", c)
			}
		})
	}
}

func TestVerifyWithZeroLeewayRefusesOneSecondPastExpiry(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Key = testKey(1)
	cfg.Leeway = 0
	now := testNow
	cfg.Now = func() time.Time { return now }
	iss, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Minute})
	now = testNow.Add(time.Minute + time.Second)
	_, err = iss.Verify(raw)
	checkVerifyError(t, err, ErrExpired, raw)
}

func TestVerifyErrorUnwrapsToItsSentinel(t *testing.T) {
	t.Parallel()
	var err error = &VerifyError{Reason: "exp has passed", Err: ErrExpired}
	if !errors.Is(err, ErrExpired) || errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is does not follow Unwrap to the sentinel")
	}
	if got, want := err.Error(), "token: expired: exp has passed"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// base64URL is the base64url alphabet in index order.
const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// tamper decodes a base64url segment, replaces old with repl in it and
// returns the new bytes.
func tamper(t *testing.T, segment, old, repl string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(segment)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(b), `"`+old+`"`, `"`+repl+`"`, 1)
	if out == string(b) {
		t.Fatalf("tamper: %q not in payload", old)
	}
	return []byte(out)
}
