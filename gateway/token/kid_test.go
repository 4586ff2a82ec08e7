package token

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// RFC 8037, appendix A.3: the JWK thumbprint of the appendix A.2 key.
func TestKeyIDIsTheRFC7638ThumbprintOfTheKey(t *testing.T) {
	t.Parallel()
	x, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := KeyID(ed25519.PublicKey(x)), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("KeyID = %q, want %q (RFC 8037 A.3)", got, want)
	}
	if PrivateKeyID(testKey(1)) == PrivateKeyID(testKey(2)) {
		t.Error("two keys share a kid")
	}
}

func TestMintedTokensCarryTheActiveKeysKid(t *testing.T) {
	t.Parallel()
	iss := newSetIssuer(t, testKey(2), testKey(1))
	raw, _ := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour})
	hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"alg":"EdDSA","kid":"` + PrivateKeyID(testKey(2)) + `","typ":"JWT"}`
	if string(hdr) != want {
		t.Errorf("header %s, want %s", hdr, want)
	}
	if iss.KeyID() != PrivateKeyID(testKey(2)) {
		t.Errorf("KeyID() = %s, want the active key's", iss.KeyID())
	}
	if ids := iss.KeyIDs(); len(ids) != 2 || ids[0] != iss.KeyID() || ids[1] != PrivateKeyID(testKey(1)) {
		t.Errorf("KeyIDs() = %v, want the active kid first, then the other", ids)
	}
}

func TestVerifyWithAKeySet(t *testing.T) {
	t.Parallel()
	a, b, c := testKey(1), testKey(2), testKey(3)
	kidA, kidB := PrivateKeyID(a), PrivateKeyID(b)
	minted := func(key ed25519.PrivateKey) func(*testing.T) string {
		return func(t *testing.T) string {
			raw, _ := mint(t, newSetIssuer(t, key), MintRequest{Role: RoleAgent, Subject: "agent:ci", TTL: time.Hour})
			return raw
		}
	}
	header := func(key ed25519.PrivateKey, extra map[string]any) func(*testing.T) string {
		return func(t *testing.T) string { return withHeader(t, key, extra) }
	}
	// swapped replaces the kid of a token A minted, keeping A's signature.
	swapped := func(kid string) func(*testing.T) string {
		return func(t *testing.T) string {
			seg := strings.Split(minted(a)(t), ".")
			hdr := `{"alg":"EdDSA","kid":"` + kid + `","typ":"JWT"}`
			return base64.RawURLEncoding.EncodeToString([]byte(hdr)) + "." + seg[1] + "." + seg[2]
		}
	}
	tests := []struct {
		name   string
		raw    func(*testing.T) string
		active ed25519.PrivateKey
		others []ed25519.PrivateKey
		want   error // nil: accepted
	}{
		{"A's token verifies on {A, B} with B active (B rotated in)", minted(a), b, []ed25519.PrivateKey{a}, nil},
		{"A's token verifies on {A, B} with A active (B added, verification only)", minted(a), a, []ed25519.PrivateKey{b}, nil},
		{"A's token is refused once A is retired", minted(a), b, nil, ErrInvalid},
		{"A's token is refused by a set that never had A", minted(a), b, []ed25519.PrivateKey{c}, ErrInvalid},
		{"a kid no key has is refused", header(a, map[string]any{"kid": "no-such-kid"}), a, []ed25519.PrivateKey{b}, ErrInvalid},
		{"an unknown kid is refused by a set of one, even with a good signature", header(a, map[string]any{"kid": "x"}), a, nil, ErrInvalid},
		{"an empty kid is refused", header(a, map[string]any{"kid": ""}), a, []ed25519.PrivateKey{b}, ErrInvalid},
		{"a kid that is not a string is refused", header(a, map[string]any{"kid": 7}), a, []ed25519.PrivateKey{b}, ErrInvalid},
		{"a kid that is a list of kids is refused", header(a, map[string]any{"kid": []string{kidA}}), a, []ed25519.PrivateKey{b}, ErrInvalid},
		{"A's token with its kid swapped for B's is refused", swapped(kidB), a, []ed25519.PrivateKey{b}, ErrInvalid},
		{"A's token with its kid swapped for B's is refused where only B verifies", swapped(kidB), b, nil, ErrInvalid},
		{"a token B signed under A's kid is refused", header(b, map[string]any{"kid": kidA}), a, []ed25519.PrivateKey{b}, ErrInvalid},
		{"a token without kid from A (minted before kids) verifies on {A}", header(a, nil), a, nil, nil},
		{"a token without kid from A verifies on {A, B} with B active", header(a, nil), b, []ed25519.PrivateKey{a}, nil},
		{"a token without kid from A is refused once A is retired", header(a, nil), b, []ed25519.PrivateKey{c}, ErrInvalid},
		{"a token without kid from C is refused by {A, B}", header(c, nil), a, []ed25519.PrivateKey{b}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := tt.raw(t)
			c, err := newSetIssuer(t, tt.active, tt.others...).Verify(raw)
			if tt.want == nil {
				if err != nil || c.Subject != "agent:ci" {
					t.Fatalf("Verify = %+v, %v; want accepted", c, err)
				}
				return
			}
			checkVerifyError(t, err, tt.want, raw)
			if c.Subject != "" {
				t.Errorf("refused Verify returned claims %+v", c)
			}
		})
	}
}

func TestNewRefusesABadKeySet(t *testing.T) {
	t.Parallel()
	pub := func(seed byte) ed25519.PublicKey { return testKey(seed).Public().(ed25519.PublicKey) }
	many := make([]ed25519.PublicKey, MaxKeys)
	for i := range many {
		many[i] = pub(byte(10 + i))
	}
	tests := []struct {
		name   string
		verify []ed25519.PublicKey
	}{
		{"the active key again as a verification key", []ed25519.PublicKey{pub(1)}},
		{"one verification key twice", []ed25519.PublicKey{pub(2), pub(2)}},
		{"a verification key of the wrong size", []ed25519.PublicKey{pub(2)[:31]}},
		{"more than MaxKeys keys in all", many},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.Key, cfg.VerifyKeys = testKey(1), tt.verify
			if _, err := New(cfg); !errors.Is(err, ErrKeySet) {
				t.Errorf("New = %v, want ErrKeySet", err)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Key, cfg.VerifyKeys = testKey(1), many[:MaxKeys-1]
	if _, err := New(cfg); err != nil {
		t.Errorf("New with MaxKeys keys in all: %v", err)
	}
}

func TestSelectActive(t *testing.T) {
	t.Parallel()
	a, b := testKey(1), testKey(2)
	many := make([]ed25519.PrivateKey, MaxKeys+1)
	for i := range many {
		many[i] = testKey(byte(10 + i))
	}
	tests := []struct {
		name       string
		keys       []ed25519.PrivateKey
		active     string
		wantActive ed25519.PrivateKey // nil: refused with ErrKeySet
		wantVerify int
	}{
		{"one key and no kid: that key signs", []ed25519.PrivateKey{a}, "", a, 0},
		{"one key named by its kid", []ed25519.PrivateKey{a}, PrivateKeyID(a), a, 0},
		{"two keys, the second active", []ed25519.PrivateKey{a, b}, PrivateKeyID(b), b, 1},
		{"two keys and no active kid", []ed25519.PrivateKey{a, b}, "", nil, 0},
		{"an active kid none of the keys has", []ed25519.PrivateKey{a}, PrivateKeyID(b), nil, 0},
		{"no keys", nil, "", nil, 0},
		{"one key twice", []ed25519.PrivateKey{a, a}, PrivateKeyID(a), nil, 0},
		{"more than MaxKeys keys", many, PrivateKeyID(many[0]), nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			active, verify, err := SelectActive(tt.keys, tt.active)
			if tt.wantActive == nil {
				if !errors.Is(err, ErrKeySet) {
					t.Fatalf("SelectActive = %v, want ErrKeySet", err)
				}
				return
			}
			if err != nil || !active.Equal(tt.wantActive) || len(verify) != tt.wantVerify {
				t.Fatalf("SelectActive = active %s, %d verify, %v", PrivateKeyID(active), len(verify), err)
			}
		})
	}
}

func TestSetKeysReplacesTheSetAndKeepsItOnARefusal(t *testing.T) {
	t.Parallel()
	a, b := testKey(1), testKey(2)
	pubA := a.Public().(ed25519.PublicKey)
	iss := newSetIssuer(t, a)
	tokA, _ := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "agent:ci", TTL: time.Hour})

	if err := iss.SetKeys(b, []ed25519.PublicKey{pubA}); err != nil {
		t.Fatal(err)
	}
	tokB, _ := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "agent:ci", TTL: time.Hour})
	if iss.KeyID() != PrivateKeyID(b) || !iss.PublicKey().Equal(b.Public()) {
		t.Fatalf("after SetKeys the signer is %s", iss.KeyID())
	}
	for _, raw := range []string{tokA, tokB} {
		if _, err := iss.Verify(raw); err != nil {
			t.Errorf("with {A, B}: %v", err)
		}
	}
	// A refused set leaves {A, B} in place.
	if err := iss.SetKeys(b, []ed25519.PublicKey{pubA, pubA}); !errors.Is(err, ErrKeySet) {
		t.Fatalf("SetKeys with a key twice = %v, want ErrKeySet", err)
	}
	if err := iss.SetKeys(nil, nil); err == nil {
		t.Fatal("SetKeys without a key was accepted")
	}
	if _, err := iss.Verify(tokA); err != nil || len(iss.KeyIDs()) != 2 {
		t.Fatalf("a refused SetKeys changed the set: %v %v", err, iss.KeyIDs())
	}
	// A retired.
	if err := iss.SetKeys(b, nil); err != nil {
		t.Fatal(err)
	}
	_, err := iss.Verify(tokA)
	checkVerifyError(t, err, ErrInvalid, tokA)
	if _, err := iss.Verify(tokB); err != nil {
		t.Errorf("B's token after A was retired: %v", err)
	}
}

func TestSetKeysWhileVerifying(t *testing.T) {
	t.Parallel()
	a, b := testKey(1), testKey(2)
	iss := newSetIssuer(t, a, b)
	tokA, _ := mint(t, iss, MintRequest{Role: RoleAgent, Subject: "agent:ci", TTL: time.Hour})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for j := range 200 {
			active, other := a, b
			if j%2 == 1 {
				active, other = b, a
			}
			if err := iss.SetKeys(active, []ed25519.PublicKey{other.Public().(ed25519.PublicKey)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 200 {
		if _, err := iss.Verify(tokA); err != nil {
			t.Fatalf("A's token while the set flips between {A, B} and {B, A}: %v", err)
		}
		if _, _, err := iss.Mint(MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}
