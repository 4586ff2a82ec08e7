package token

import "errors"

// The two ways an Authorization header fails ParseBearer.
var (
	// ErrNoAuthorization: the request has no Authorization header (or an
	// empty one).
	ErrNoAuthorization = errors.New("token: no Authorization header")
	// ErrMalformedAuthorization: the header is not "Bearer", one space and
	// a token.
	ErrMalformedAuthorization = errors.New(`token: the Authorization header must be "Bearer <token>": the word Bearer, one space, the token`)
)

// ParseBearer is the one parser of bearer credentials in sandgate: the
// REST routes and /mcp (before its transport) both use it, so no request
// can be read as one token by one of them and as another, or as none, by
// the other (docs/api.md, Authentication).
//
// The header must be exactly the scheme, one space (0x20) and the token:
// no tab, no no-break space, no second space, nothing before or after.
// The scheme is matched case-insensitively, as RFC 9110 section 11.1 and
// RFC 6750 section 2.1 say it is ("bearer" and "BEARER" are the same
// scheme). The token must be an RFC 6750 b64token: letters, digits and
// "-._~+/", then any number of "=". A JWT is one. Anything else is
// ErrMalformedAuthorization; an empty header is ErrNoAuthorization. The
// token returned is not verified.
func ParseBearer(header string) (string, error) {
	if header == "" {
		return "", ErrNoAuthorization
	}
	const scheme = "bearer "
	if len(header) <= len(scheme) || !equalFoldASCII(header[:len(scheme)-1], scheme[:len(scheme)-1]) || header[len(scheme)-1] != ' ' {
		return "", ErrMalformedAuthorization
	}
	raw := header[len(scheme):]
	if !isB64Token(raw) {
		return "", ErrMalformedAuthorization
	}
	return raw, nil
}

// equalFoldASCII compares a with the lower-case ASCII word lower, ignoring
// ASCII case only (strings.EqualFold also folds non-ASCII letters, such as
// the Kelvin sign into k).
func equalFoldASCII(a, lower string) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// isB64Token reports whether s is 1*( ALPHA / DIGIT / "-" / "." / "_" /
// "~" / "+" / "/" ) *"=" (RFC 6750 section 2.1).
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
