package attack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"sandgate/gateway/apitest"
)

// opClaims are the claims of the world's real operator token: a forgery
// that carries them would be the operator if it were accepted.
func opClaims(w *world) map[string]any { return recorded(w.tokens["op"]) }

func with(c map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(out, k)
			continue
		}
		out[k] = kv[i+1]
	}
	return out
}

// listAsForged is the request every forgery is tried on: the operator's
// view of all sandboxes.
var listAsForged = apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes"}

// forged is a case for a token the verifier must refuse before anything
// else looks at it: 401 unauthenticated, no policy decision.
func forged(name string, f func(w *world) string) attack {
	return attack{name: name, req: listAsForged, forge: f, status: 401, code: "unauthenticated"}
}

// noFetch serves as an attacker's key URL (jku, x5u) and counts what is
// fetched from it: the gateway must fetch nothing.
func noFetch(t *testing.T) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(rw, "no", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

func forgedTokenCases(t *testing.T, w *world) []attack {
	pub, priv := attackerKey()
	jku, jkuHits := noFetch(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fetched := func(n *atomic.Int64) func(t *testing.T, w *world, r apitest.Reply) {
		return func(t *testing.T, _ *world, _ apitest.Reply) {
			if got := n.Load(); got != 0 {
				t.Errorf("the gateway fetched the attacker's URL %d times", got)
			}
		}
	}
	none := func(alg string) func(w *world) string {
		return func(w *world) string { return jose(map[string]any{"alg": alg, "typ": "JWT"}, opClaims(w), nil) }
	}
	cases := []attack{
		forged("alg none with the operator's claims", none("none")),
		forged("alg NoNe in mixed case", none("NoNe")),
		forged("alg none keeping the real token's signature", func(w *world) string {
			parts := strings.Split(w.tokens["op"], ".")
			return strings.TrimSuffix(jose(map[string]any{"alg": "none"}, opClaims(w), nil), ".") + "." + parts[2]
		}),
		forged("an empty alg", none("")),
		forged("HS256 keyed with the raw public key", func(w *world) string {
			return jose(map[string]any{"alg": "HS256", "typ": "JWT"}, opClaims(w), hsSigner(w.iss.PublicKey()))
		}),
		forged("HS256 keyed with the public key's PEM", func(w *world) string {
			return jose(map[string]any{"alg": "HS256", "typ": "JWT"}, opClaims(w), hsSigner(w.publicKeyPEM()))
		}),
		forged("HS256 keyed with the public key's JWK x", func(w *world) string {
			return jose(map[string]any{"alg": "HS256"}, opClaims(w), hsSigner([]byte(b64.EncodeToString(w.iss.PublicKey()))))
		}),
		forged("HS256 with an empty key", func(w *world) string {
			return jose(map[string]any{"alg": "HS256"}, opClaims(w), hsSigner(nil))
		}),
		forged("ES256 with the attacker's own key", func(w *world) string {
			return viaLibrary(jwt.SigningMethodES256, ecKey, opClaims(w))
		}),
		forged("EdDSA signed by the attacker with an embedded jwk", func(w *world) string {
			return jose(map[string]any{"alg": "EdDSA", "typ": "JWT", "jwk": okpJWK(pub)}, opClaims(w), edSigner(priv))
		}),
		forged("EdDSA with an embedded x5c of the attacker's certificate", func(w *world) string {
			return jose(map[string]any{"alg": "EdDSA", "x5c": selfSignedCert(pub, priv)}, opClaims(w), edSigner(priv))
		}),
		forged("kid naming /dev/null with HS256 and an empty key", func(w *world) string {
			return jose(map[string]any{"alg": "HS256", "kid": "../../../../../../dev/null"}, opClaims(w), hsSigner(nil))
		}),
		forged("kid carrying SQL with HS256 keyed by the injected value", func(w *world) string {
			return jose(map[string]any{"alg": "HS256", "kid": "x' UNION SELECT 'k'--"}, opClaims(w), hsSigner([]byte("k")))
		}),
		forged("kid of the attacker's key signed by it", func(w *world) string {
			return jose(map[string]any{"alg": "EdDSA", "kid": "sandgate"}, opClaims(w), edSigner(priv))
		}),
		{
			name: "jku pointing at the attacker's JWKS", req: listAsForged, status: 401, code: "unauthenticated",
			forge: func(w *world) string {
				return jose(map[string]any{"alg": "EdDSA", "jku": jku + "/jwks.json", "kid": "a"}, opClaims(w), edSigner(priv))
			},
			check: fetched(jkuHits),
		},
		{
			name: "x5u pointing at the attacker's certificate", req: listAsForged, status: 401, code: "unauthenticated",
			forge: func(w *world) string {
				return jose(map[string]any{"alg": "EdDSA", "x5u": jku + "/cert.pem"}, opClaims(w), edSigner(priv))
			},
			check: fetched(jkuHits),
		},
		forged("an agent token's signature transplanted onto operator claims", func(w *world) string {
			a := strings.Split(w.tokens["agentA"], ".")
			c := with(recorded(w.tokens["agentA"]), "role", "operator", "scopes", w.engine.Settings().RoleScopes("operator"))
			body := strings.Split(jose(map[string]any{}, c, nil), ".")[1]
			return a[0] + "." + body + "." + a[2]
		}),
		forged("the operator's payload re-encoded with the original signature", func(w *world) string {
			p := strings.Split(w.tokens["op"], ".")
			return p[0] + "." + strings.Split(jose(map[string]any{}, opClaims(w), nil), ".")[1] + "." + p[2]
		}),
		forged("spare bits set in the signature's last base64 character", func(w *world) string {
			p := strings.Split(w.tokens["op"], ".")
			return p[0] + "." + p[1] + "." + flipSpareBits(p[2])
		}),
		forged("a payload in non-canonical base64 signed by the real key", func(w *world) string {
			return nonCanonicalPayload(w)
		}),
		forged("base64 padding appended to the signature", func(w *world) string { return w.tokens["op"] + "==" }),
		forged("standard base64 alphabet signed by the real key", func(w *world) string { return stdAlphabet(w) }),
		forged("a tab inside the token", func(w *world) string {
			raw := w.tokens["op"]
			return raw[:20] + "\t" + raw[20:]
		}),
		forged("a 9 KiB token signed by the real key", func(w *world) string {
			return w.signedWithWorldKey(with(opClaims(w), "label", strings.Repeat("x", 9<<10)), nil)
		}),
		forged("JWS JSON serialization", func(w *world) string {
			p := strings.Split(w.tokens["op"], ".")
			return base64.RawURLEncoding.EncodeToString([]byte(`{"protected":"` + p[0] + `","payload":"` + p[1] + `","signature":"` + p[2] + `"}`))
		}),
		forged("five segments like a JWE", func(w *world) string { return w.tokens["op"] + ".AAAA.BBBB" }),
		forged("a crit header asking for unencoded payloads", func(w *world) string {
			return w.signedWithWorldKey(opClaims(w), map[string]any{"crit": []string{"b64"}, "b64": false})
		}),
		forged("nbf an hour ahead", func(w *world) string {
			now := w.clock.Now().Unix()
			return w.signedWithWorldKey(with(opClaims(w), "nbf", now+3600, "iat", now), nil)
		}),
		forged("iat an hour ahead", func(w *world) string {
			return w.signedWithWorldKey(with(opClaims(w), "iat", w.clock.Now().Unix()+3600), nil)
		}),
		forged("another issuer", func(w *world) string { return w.signedWithWorldKey(with(opClaims(w), "iss", "evil"), nil) }),
		forged("another audience", func(w *world) string {
			return w.signedWithWorldKey(with(opClaims(w), "aud", []string{"nomad"}), nil)
		}),
		forged("no audience", func(w *world) string { return w.signedWithWorldKey(with(opClaims(w), "aud", nil), nil) }),
		forged("no exp", func(w *world) string { return w.signedWithWorldKey(with(opClaims(w), "exp", nil), nil) }),
		forged("an unknown role admin", func(w *world) string { return w.signedWithWorldKey(with(opClaims(w), "role", "admin"), nil) }),
		forged("an operator token carrying a sandbox_id", func(w *world) string {
			return w.signedWithWorldKey(with(opClaims(w), "sandbox_id", w.ids["a1"]), nil)
		}),
		forged("a session token without a sandbox_id", func(w *world) string {
			return w.signedWithWorldKey(with(recorded(w.tokens["sess:a1"]), "sandbox_id", nil), nil)
		}),
		{
			name: "exp two minutes ago on the operator's recorded jti", req: listAsForged, status: 401, code: "token_expired",
			forge: func(w *world) string {
				now := w.clock.Now().Unix()
				return w.signedWithWorldKey(with(opClaims(w), "exp", now-120, "iat", now-3600, "nbf", now-3600), nil)
			},
		},
		{
			name: "an unrecorded operator token signed by the real key", req: listAsForged, status: 401, code: "unauthenticated", rules: []string{"T4"},
			forge: func(w *world) string { return w.signedWithWorldKey(w.claims("operator", "ops", nil), nil) },
		},
		{
			name: "operator role on the agent's recorded jti", req: listAsForged, status: 401, code: "unauthenticated", rules: []string{"T4"},
			forge: func(w *world) string {
				return w.signedWithWorldKey(with(recorded(w.tokens["agentA"]), "role", "operator", "scopes", w.engine.Settings().RoleScopes("operator")), nil)
			},
		},
		{
			name: "another subject on the operator's recorded jti", req: listAsForged, status: 401, code: "unauthenticated", rules: []string{"T4"},
			forge: func(w *world) string { return w.signedWithWorldKey(with(opClaims(w), "sub", "root"), nil) },
		},
		{
			name: "a session token re-signed with the sandbox's jti but not its digest",
			req:  apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}"}, status: 401, code: "unauthenticated", rules: []string{"T4"},
			forge: func(w *world) string {
				return w.signedWithWorldKey(with(recorded(w.tokens["sess:a1"]), "label", "x"), nil)
			},
		},
		{name: "the Basic scheme", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Auth: "Basic {tok:op}"}, status: 401, code: "unauthenticated"},
		{name: "a bare token without a scheme", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Auth: "{tok:op}"}, status: 401, code: "unauthenticated"},
		{name: "Bearer with no token", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Auth: "Bearer    "}, status: 401, code: "unauthenticated"},
		{name: "two bearer tokens in one header", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Auth: "Bearer {tok:agentA}, Bearer {tok:op}"}, status: 401, code: "unauthenticated"},
		{name: "the token in the query string only", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes?access_token={tok:op}"}, status: 401, code: "unauthenticated"},
		{name: "the token in a cookie only", req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Header: map[string]string{"Cookie": "token={tok:op}"}}, status: 401, code: "unauthenticated"},
	}
	return cases
}

// nonCanonicalPayload is a token signed by the world's key over a payload
// whose base64 has spare bits set: the same claims in a second spelling,
// which a lenient decoder would accept with a digest of its own.
func nonCanonicalPayload(w *world) string {
	for pad := 0; ; pad++ {
		c := with(opClaims(w), "label", strings.Repeat("p", pad))
		parts := strings.Split(jose(map[string]any{"alg": "EdDSA", "typ": "JWT"}, c, nil), ".")
		if len(parts[1])%4 == 0 {
			continue // no spare bits to set
		}
		input := parts[0] + "." + flipSpareBits(parts[1])
		return input + "." + b64.EncodeToString(edSigner(w.key)([]byte(input)))
	}
}

// stdAlphabet is a token signed by the world's key whose segments use the
// standard base64 alphabet ('+', '/') instead of base64url.
func stdAlphabet(w *world) string {
	std := base64.RawStdEncoding
	for n := 0; ; n++ {
		c := with(opClaims(w), "label", strings.Repeat("?", n)+">")
		hdr := std.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT"}`))
		body := std.EncodeToString(mustJSON(c))
		if !strings.ContainsAny(body, "+/") {
			continue
		}
		input := hdr + "." + body
		return input + "." + std.EncodeToString(edSigner(w.key)([]byte(input)))
	}
}
