package token

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Mint a session token for a new sandbox, verify it, and see it refused once
// it has expired.
func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	cfg.Key = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // in production: LoadOrCreateKey
	cfg.Now = func() time.Time { return now }
	iss, err := New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}

	raw, minted, err := iss.Mint(MintRequest{
		Role:      RoleSession,
		Subject:   "agent:ci",
		SandboxID: "sbx-7f3a",
		Scopes:    []string{"status", "exec", "logs", "destroy"},
		TTL:       15 * time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Show raw to the caller once; keep only its digest.
	fmt.Println("store digest of", len(Digest(raw))/2, "bytes for jti of", len(minted.ID), "chars")

	c, err := iss.Verify(raw)
	fmt.Println(c.Role, c.Subject, c.SandboxID, c.Scopes, c.ExpiresAt.UTC().Format(time.RFC3339), err)

	now = now.Add(time.Hour)
	_, err = iss.Verify(raw)
	var ve *VerifyError
	if errors.Is(err, ErrExpired) && errors.As(err, &ve) {
		fmt.Println("refused:", ve.Reason)
	}
	// Output:
	// store digest of 32 bytes for jti of 26 chars
	// session agent:ci sbx-7f3a [status exec logs destroy] 2026-03-01T12:15:00Z <nil>
	// refused: exp 2026-03-01T12:15:00Z has passed (leeway 30s)
}

// A token that is not a JWT, or not signed by this issuer, is refused with a
// sentinel the HTTP layer can map to 401 and a reason it can show.
func ExampleIssuer_Verify() {
	cfg := DefaultConfig()
	cfg.Key = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	iss, err := New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, raw := range []string{"not-a-jwt", "eyJhbGciOiJub25lIn0.e30."} {
		_, err := iss.Verify(raw)
		fmt.Println(errors.Is(err, ErrMalformed), errors.Is(err, ErrInvalid), err)
	}
	// Output:
	// true false token: malformed: not three dot-separated segments
	// false true token: invalid: signing method not allowed
}

// The first start creates the key; later starts load the same key.
func ExampleLoadOrCreateKey() {
	dir, err := os.MkdirTemp("", "sandgate-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "keys", "token.pem")

	first, created, err := LoadOrCreateKey(path)
	fmt.Println("created:", created, err)
	second, created, err := LoadOrCreateKey(path)
	fmt.Println("created:", created, err, "same key:", first.Equal(second))
	// Output:
	// created: true <nil>
	// created: false <nil> same key: true
}

// Rotate with overlap in a key directory: add a key, activate it, and
// retire the old one once its tokens have expired. A gateway (re)started
// on the directory at each step signs with the active key and verifies
// with all of them.
func ExampleActivate() {
	dir, err := os.MkdirTemp("", "sandgate-keys-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	issuer := func() *Issuer {
		d, err := ReadKeyDir(dir)
		if err != nil {
			panic(err)
		}
		cfg := DefaultConfig()
		if cfg.Key, cfg.VerifyKeys, err = d.Select(); err != nil {
			panic(err)
		}
		iss, err := New(cfg)
		if err != nil {
			panic(err)
		}
		return iss
	}

	oldKey, _ := CreateKey(dir)
	_ = Activate(dir, oldKey.KID)
	raw, _, _ := issuer().Mint(MintRequest{Role: RoleAgent, Subject: "ci", TTL: time.Hour})

	newKey, _ := CreateKey(dir) // 1. verification only, on every replica
	_ = Activate(dir, newKey.KID)
	_, err = issuer().Verify(raw) // 2. the new key signs; the old token still verifies
	fmt.Println("after activation:", err)

	_, err = Retire(dir, newKey.KID)
	fmt.Println("retire the active key:", errors.Is(err, ErrKeyActive))
	_, _ = Retire(dir, oldKey.KID) // 3. once the old key's tokens have expired
	_, err = issuer().Verify(raw)
	fmt.Println("after retirement:", err)
	// Output:
	// after activation: <nil>
	// retire the active key: true
	// after retirement: token: invalid: unknown key id
}
