package token

import (
	"crypto/ed25519"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMintThenVerifyReturnsTheSameClaims(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t, testNow)
	tests := []struct {
		name string
		req  MintRequest
	}{
		{"an operator token round-trips", MintRequest{
			Role: RoleOperator, Subject: "op:alice", TTL: time.Hour, Label: "laptop",
		}},
		{"an agent token round-trips with its scopes", MintRequest{
			Role: RoleAgent, Subject: "agent:ci", Scopes: []string{"sandboxes:create"}, TTL: 24 * time.Hour,
		}},
		{"a session token round-trips bound to its sandbox", MintRequest{
			Role: RoleSession, Subject: "agent:ci", SandboxID: "sbx-7f3a",
			Scopes: []string{"status", "exec", "logs", "destroy"}, TTL: 15 * time.Minute,
		}},
		{"an absolute expiry overrides the ttl", MintRequest{
			Role: RoleSession, Subject: "agent:ci", SandboxID: "sbx-1",
			TTL: time.Minute, ExpiresAt: testNow.Add(2 * time.Hour),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, minted := mint(t, iss, tt.req)
			got, err := iss.Verify(raw)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !reflect.DeepEqual(got, minted) {
				t.Errorf("Verify claims differ from Mint's\n got  %+v\n want %+v", got, minted)
			}
			wantExp := testNow.Add(tt.req.TTL)
			if !tt.req.ExpiresAt.IsZero() {
				wantExp = tt.req.ExpiresAt
			}
			switch {
			case got.Issuer != "sandgate" || len(got.Audience) != 1 || got.Audience[0] != "sandgate-api":
				t.Errorf("iss/aud = %q/%q", got.Issuer, got.Audience)
			case got.Role != tt.req.Role || got.Subject != tt.req.Subject || got.SandboxID != tt.req.SandboxID:
				t.Errorf("role/sub/sandbox = %q/%q/%q", got.Role, got.Subject, got.SandboxID)
			case !got.IssuedAt.Equal(testNow) || !got.NotBefore.Equal(testNow):
				t.Errorf("iat/nbf = %v/%v, want %v", got.IssuedAt, got.NotBefore, testNow)
			case !got.ExpiresAt.Equal(wantExp):
				t.Errorf("exp = %v, want %v", got.ExpiresAt, wantExp)
			case len(got.ID) != 26:
				t.Errorf("jti %q: want 26 base32 characters (128 bits)", got.ID)
			case !reflect.DeepEqual(got.Scopes, tt.req.Scopes):
				t.Errorf("scopes = %q, want %q", got.Scopes, tt.req.Scopes)
			}
		})
	}
}

func TestMintGivesEachTokenItsOwnID(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t, testNow)
	seen := map[string]bool{}
	for range 100 {
		_, c := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour})
		if seen[c.ID] {
			t.Fatalf("jti %q minted twice", c.ID)
		}
		seen[c.ID] = true
	}
}

func TestMintTruncatesExpiryToWholeSeconds(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t, testNow.Add(400*time.Millisecond))
	_, c := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "a", TTL: 1500 * time.Millisecond})
	// now = :00.4, now+ttl = :01.9 -> exp :01, never later than asked.
	if want := testNow.Add(time.Second); !c.ExpiresAt.Equal(want) {
		t.Errorf("exp = %v, want %v", c.ExpiresAt, want)
	}
}

func TestMintRefuses(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t, testNow)
	tests := []struct {
		name string
		req  MintRequest
	}{
		{"an unknown role", MintRequest{Role: "admin", Subject: "a", TTL: time.Hour}},
		{"an empty role", MintRequest{Subject: "a", TTL: time.Hour}},
		{"an empty subject", MintRequest{Role: RoleOperator, TTL: time.Hour}},
		{"a session token without a sandbox", MintRequest{Role: RoleSession, Subject: "a", TTL: time.Hour}},
		{"an agent token with a sandbox", MintRequest{Role: RoleAgent, Subject: "a", SandboxID: "sbx-1", TTL: time.Hour}},
		{"an operator token with a sandbox", MintRequest{Role: RoleOperator, Subject: "a", SandboxID: "sbx-1", TTL: time.Hour}},
		{"a zero ttl without an expiry", MintRequest{Role: RoleAgent, Subject: "a"}},
		{"a negative ttl", MintRequest{Role: RoleAgent, Subject: "a", TTL: -time.Hour}},
		{"an expiry in the past", MintRequest{Role: RoleAgent, Subject: "a", ExpiresAt: testNow.Add(-time.Second)}},
		{"an expiry equal to now", MintRequest{Role: RoleAgent, Subject: "a", ExpiresAt: testNow}},
		{"a lifetime under one second", MintRequest{Role: RoleAgent, Subject: "a", TTL: 500 * time.Millisecond}},
		{"a token larger than Verify accepts", MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour, Label: strings.Repeat("x", MaxTokenSize)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, c, err := iss.Mint(tt.req)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
			if raw != "" || !reflect.DeepEqual(c, Claims{}) {
				t.Errorf("refused Mint returned a token or claims")
			}
		})
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	t.Parallel()
	other := testKey(2)
	mismatched := append(ed25519.PrivateKey{}, testKey(1)[:ed25519.SeedSize]...)
	mismatched = append(mismatched, other.Public().(ed25519.PublicKey)...)
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no key", func(c *Config) { c.Key = nil }},
		{"a short key", func(c *Config) { c.Key = c.Key[:ed25519.SeedSize] }},
		{"a key whose public half is another key's", func(c *Config) { c.Key = mismatched }},
		{"an empty issuer", func(c *Config) { c.Issuer = "" }},
		{"an empty audience", func(c *Config) { c.Audience = "" }},
		{"a negative leeway", func(c *Config) { c.Leeway = -time.Second }},
		{"a leeway over 30s", func(c *Config) { c.Leeway = 31 * time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.Key = testKey(1)
			tt.mutate(&cfg)
			if iss, err := New(cfg); err == nil || iss != nil {
				t.Fatalf("New = %v, %v; want an error", iss, err)
			}
		})
	}
}

func TestNewDefaultsTheClockAndAllowsZeroLeeway(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Key = testKey(1)
	cfg.Leeway = 0
	iss, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	raw, _ := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Minute})
	if _, err := iss.Verify(raw); err != nil {
		t.Fatalf("Verify with the real clock: %v", err)
	}
}

func TestPublicKeyVerifiesAndIsACopy(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t, testNow)
	pub := iss.PublicKey()
	if !pub.Equal(testKey(1).Public()) {
		t.Fatalf("PublicKey is not the config key's public half")
	}
	pub[0] ^= 0xff
	if !iss.PublicKey().Equal(testKey(1).Public()) {
		t.Errorf("changing the returned key changed the issuer's")
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"the digest of abc is its SHA-256 in hex", Digest("abc"), abc, true},
		{"different tokens have different digests", Digest("abc"), Digest("abd"), false},
		{"a digest prefix is not equal", abc, abc[:63], false},
		{"empty digests are equal", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := DigestEqual(tt.a, tt.b); got != tt.want {
				t.Errorf("DigestEqual(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestRoleValid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		role Role
		want bool
	}{
		{RoleOperator, true}, {RoleAgent, true}, {RoleSession, true},
		{"", false}, {"admin", false}, {"Operator", false},
	} {
		if got := tt.role.Valid(); got != tt.want {
			t.Errorf("Role(%q).Valid() = %v, want %v", tt.role, got, tt.want)
		}
	}
}

func TestIssuerIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t, testNow)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				raw, _, err := iss.Mint(MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour})
				if err != nil {
					t.Errorf("Mint: %v", err)
					return
				}
				if _, err := iss.Verify(raw); err != nil {
					t.Errorf("Verify: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkVerify(b *testing.B) {
	iss := newIssuer(b, testNow)
	raw, _ := mint(b, iss, MintRequest{
		Role: RoleSession, Subject: "agent:ci", SandboxID: "sbx-7f3a",
		Scopes: []string{"status", "exec", "logs", "destroy"}, TTL: 15 * time.Minute,
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := iss.Verify(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMint(b *testing.B) {
	iss := newIssuer(b, testNow)
	req := MintRequest{
		Role: RoleSession, Subject: "agent:ci", SandboxID: "sbx-7f3a",
		Scopes: []string{"status", "exec", "logs", "destroy"}, TTL: 15 * time.Minute,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := iss.Mint(req); err != nil {
			b.Fatal(err)
		}
	}
}
