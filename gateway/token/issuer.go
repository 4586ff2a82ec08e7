package token

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxLeeway is the largest clock skew Config.Leeway may allow.
const MaxLeeway = 30 * time.Second

// Config configures an Issuer. Start from DefaultConfig and set Key.
type Config struct {
	// Issuer is the iss claim minted and required; must not be empty.
	Issuer string
	// Audience is the aud claim minted and required; must not be empty.
	Audience string
	// Key signs tokens: it is the active key of the set, and its kid
	// (KeyID) goes into every token's header. Its public half verifies
	// them. Required.
	Key ed25519.PrivateKey
	// VerifyKeys are further keys whose tokens Verify accepts: a key being
	// rotated in (not yet active everywhere) or out (its tokens not yet
	// all expired). At most MaxKeys-1, none twice and none Key's own
	// public half. nil: Key alone, a set of one.
	VerifyKeys []ed25519.PublicKey
	// Leeway is the clock skew tolerated on exp, nbf and iat, between 0 and
	// MaxLeeway (DefaultConfig: 30s).
	Leeway time.Duration
	// Now is the clock; nil means time.Now. Tests inject a fixed clock.
	Now func() time.Time
}

// DefaultConfig returns issuer "sandgate", audience "sandgate-api" and a 30s
// leeway. Key is left empty; New refuses a Config without one.
func DefaultConfig() Config {
	return Config{
		Issuer:   "sandgate",
		Audience: "sandgate-api",
		Leeway:   MaxLeeway,
	}
}

func (c Config) validate() error {
	switch {
	case c.Issuer == "":
		return errors.New("token: config: empty issuer")
	case c.Audience == "":
		return errors.New("token: config: empty audience")
	case c.Leeway < 0 || c.Leeway > MaxLeeway:
		return fmt.Errorf("token: config: leeway %s outside 0..%s", c.Leeway, MaxLeeway)
	}
	return nil
}

// Issuer mints tokens with its active key and verifies them with every key
// of its set; SetKeys replaces the set. It is safe for concurrent use.
type Issuer struct {
	cfg    Config
	keys   atomic.Pointer[keySet]
	parser *jwt.Parser
}

// New validates cfg and returns an Issuer.
func New(cfg Config) (*Issuer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ks, err := newKeySet(cfg.Key, cfg.VerifyKeys)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The keys live in i.keys alone, so SetKeys replaces them everywhere.
	cfg.Key, cfg.VerifyKeys = nil, nil
	i := &Issuer{cfg: cfg}
	i.keys.Store(ks)
	// The parser is built once and only read afterwards, so it is safe to
	// share between goroutines.
	i.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithNotBeforeRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(cfg.Now),
		jwt.WithStrictDecoding(),
	)
	return i, nil
}

// SetKeys replaces the key set, as Config.Key and Config.VerifyKeys give
// it: from its return on, Mint signs with key and Verify accepts the
// tokens of key and verify alone. A set New would refuse is refused
// (ErrKeySet, or an error about key) and the old set stays.
func (i *Issuer) SetKeys(key ed25519.PrivateKey, verify []ed25519.PublicKey) error {
	ks, err := newKeySet(key, verify)
	if err != nil {
		return err
	}
	i.keys.Store(ks)
	return nil
}

// PublicKey returns a copy of the active key's public half: the key that
// verifies the tokens this Issuer mints.
func (i *Issuer) PublicKey() ed25519.PublicKey {
	return slices.Clone(i.keys.Load().pub)
}

// KeyID returns the active key's kid, the one in every token Mint signs.
func (i *Issuer) KeyID() string { return i.keys.Load().kid }

// KeyIDs returns the kids of every key Verify accepts, the active one
// first.
func (i *Issuer) KeyIDs() []string {
	ks := i.keys.Load()
	out := make([]string, len(ks.all))
	for j, v := range ks.all {
		out[j] = v.kid
	}
	return out
}

// MintRequest describes a token to mint.
type MintRequest struct {
	// Role is required and must be valid.
	Role Role
	// Subject (sub) names the principal; required.
	Subject string
	// SandboxID is required for RoleSession and forbidden otherwise.
	SandboxID string
	// Scopes are copied into the token as given.
	Scopes []string
	// TTL is the lifetime from now; used when ExpiresAt is zero.
	TTL time.Duration
	// Label is an optional free-text note.
	Label string
	// ExpiresAt, when not zero, is the absolute expiry and overrides TTL
	// (a session token expires with its sandbox).
	ExpiresAt time.Time
}

func (r MintRequest) validate(now time.Time) error {
	switch {
	case !r.Role.Valid():
		return fmt.Errorf("unknown role %q: %w", r.Role, ErrInvalidRequest)
	case r.Subject == "":
		return fmt.Errorf("empty subject: %w", ErrInvalidRequest)
	case r.Role == RoleSession && r.SandboxID == "":
		return fmt.Errorf("session token without sandbox id: %w", ErrInvalidRequest)
	case r.Role != RoleSession && r.SandboxID != "":
		return fmt.Errorf("%s token with a sandbox id: %w", r.Role, ErrInvalidRequest)
	case r.ExpiresAt.IsZero() && r.TTL <= 0:
		return fmt.Errorf("ttl %s is not positive: %w", r.TTL, ErrInvalidRequest)
	case !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now):
		return fmt.Errorf("expiry is not in the future: %w", ErrInvalidRequest)
	}
	return nil
}

// Mint signs a new token for req with the active key, whose kid it puts in
// the header, and returns it with its claims: iss and aud
// from the Config, a random 128-bit jti, iat = nbf = now and exp = now+TTL
// (or req.ExpiresAt). Times are whole seconds, truncated, so a token never
// outlives what was asked. A request Mint must refuse yields an error
// matching ErrInvalidRequest.
func (i *Issuer) Mint(req MintRequest) (raw string, c Claims, err error) {
	now := i.cfg.Now()
	if err := req.validate(now); err != nil {
		return "", Claims{}, fmt.Errorf("token: mint: %w", err)
	}
	exp := req.ExpiresAt
	if exp.IsZero() {
		exp = now.Add(req.TTL)
	}
	// Whole seconds in time.Unix's representation: exactly what Verify
	// decodes, so the claims returned here compare equal to Verify's.
	iat := time.Unix(now.Unix(), 0)
	expAt := time.Unix(exp.Unix(), 0)
	if !expAt.After(iat) {
		return "", Claims{}, fmt.Errorf("token: mint: lifetime under one second: %w", ErrInvalidRequest)
	}

	c = Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.cfg.Issuer,
			Subject:   req.Subject,
			Audience:  jwt.ClaimStrings{i.cfg.Audience},
			ExpiresAt: jwt.NewNumericDate(expAt),
			NotBefore: jwt.NewNumericDate(iat),
			IssuedAt:  jwt.NewNumericDate(iat),
			ID:        rand.Text(), // 26 base32 characters, 128 bits
		},
		Role:      req.Role,
		SandboxID: req.SandboxID,
		Label:     req.Label,
	}
	if len(req.Scopes) > 0 {
		c.Scopes = slices.Clone(req.Scopes)
	}
	ks := i.keys.Load()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"] = ks.kid
	raw, err = tok.SignedString(ks.key)
	if err != nil {
		return "", Claims{}, fmt.Errorf("token: mint: sign: %w", err)
	}
	if len(raw) > MaxTokenSize {
		return "", Claims{}, fmt.Errorf("token: mint: token of %d bytes exceeds %d: %w", len(raw), MaxTokenSize, ErrInvalidRequest)
	}
	return raw, c, nil
}
