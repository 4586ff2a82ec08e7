package attack

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Hand-made JOSE: the header and the claims are written as JSON by the
// attack, base64url-encoded, and signed (or not) as the attack requires.

var b64 = base64.RawURLEncoding

// jose joins a header and claims (any JSON value) and signs the signing
// input with sign; a nil sign leaves the signature empty.
func jose(header, claims any, sign func(input []byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	if sign == nil {
		return input + "."
	}
	return input + "." + b64.EncodeToString(sign([]byte(input)))
}

func edSigner(key ed25519.PrivateKey) func([]byte) []byte {
	return func(in []byte) []byte { return ed25519.Sign(key, in) }
}

func hsSigner(secret []byte) func([]byte) []byte {
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		return m.Sum(nil)
	}
}

// claims are the claims the world's issuer would mint for role and sub
// (a fresh jti, unless one is given in extra), valid for an hour; extra
// overrides or adds members (a nil value deletes one).
func (w *world) claims(role, sub string, extra map[string]any) map[string]any {
	now := w.clock.Now().Unix()
	c := map[string]any{
		"iss": "sandgate", "aud": []string{"sandgate-api"}, "sub": sub,
		"exp": now + 3600, "nbf": now, "iat": now, "jti": rand.Text(), "role": role,
		"scopes": w.engine.Settings().RoleScopes(role),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// recorded returns the claims of a recorded token (its jti, role, sub and
// scopes), for forgeries that reuse a real record.
func recorded(raw string) map[string]any {
	parts := strings.Split(raw, ".")
	data, _ := b64.DecodeString(parts[1])
	var c map[string]any
	_ = json.Unmarshal(data, &c)
	return c
}

// signedWithWorldKey signs claims with the world's own key and header
// {"alg":"EdDSA","typ":"JWT"} plus extra header members: what only a
// holder of the key could make.
func (w *world) signedWithWorldKey(claims map[string]any, header map[string]any) string {
	h := map[string]any{"alg": "EdDSA", "typ": "JWT"}
	for k, v := range header {
		h[k] = v
	}
	return jose(h, claims, edSigner(w.key))
}

// attackerKey is a fresh Ed25519 key the gateway has never seen.
func attackerKey() (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return pub, priv
}

// okpJWK is pub as a JWK.
func okpJWK(pub ed25519.PublicKey) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(pub), "use": "sig"}
}

// selfSignedCert is an x5c chain of one certificate for priv.
func selfSignedCert(pub ed25519.PublicKey, priv ed25519.PrivateKey) []string {
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandgate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, pub, priv)
	if err != nil {
		panic(err)
	}
	return []string{base64.StdEncoding.EncodeToString(der)}
}

// publicKeyPEM is the world's public key as a PKIX PEM block: the bytes an
// HS256 key-confusion attack would try as the HMAC secret.
func (w *world) publicKeyPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(w.iss.PublicKey())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// viaLibrary signs claims with golang-jwt for algorithms the gateway
// never accepts (the attacker's own keys).
func viaLibrary(m jwt.SigningMethod, key any, claims map[string]any) string {
	raw, err := jwt.NewWithClaims(m, jwt.MapClaims(claims)).SignedString(key)
	if err != nil {
		panic(err)
	}
	return raw
}

// flipSpareBits rewrites the last character of a base64url segment whose
// bit length is not a multiple of 8 so that it decodes to the same bytes
// under a lenient decoder: a second spelling of the same token.
func flipSpareBits(seg string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[last|1])
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
