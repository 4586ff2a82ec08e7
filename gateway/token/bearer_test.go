package token

import (
	"errors"
	"regexp"
	"testing"
)

func TestParseBearerTakesOneSpellingOnly(t *testing.T) {
	t.Parallel()
	const jwt = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
	for _, tc := range []struct {
		name, header string
		want         string
		err          error
	}{
		{"the canonical form", "Bearer " + jwt, jwt, nil},
		{"the scheme in lower case (RFC 9110: case-insensitive)", "bearer " + jwt, jwt, nil},
		{"the scheme in upper case", "BEARER " + jwt, jwt, nil},
		{"a b64token with padding", "Bearer abc+/~_-.==", "abc+/~_-.==", nil},
		{"no header", "", "", ErrNoAuthorization},
		{"a tab after the scheme", "Bearer\t" + jwt, "", ErrMalformedAuthorization},
		{"a no-break space after the scheme", "Bearer\u00a0" + jwt, "", ErrMalformedAuthorization},
		{"two spaces", "Bearer  " + jwt, "", ErrMalformedAuthorization},
		{"a trailing space", "Bearer " + jwt + " ", "", ErrMalformedAuthorization},
		{"a trailing tab", "Bearer " + jwt + "\t", "", ErrMalformedAuthorization},
		{"a leading space", " Bearer " + jwt, "", ErrMalformedAuthorization},
		{"an empty token", "Bearer ", "", ErrMalformedAuthorization},
		{"the scheme alone", "Bearer", "", ErrMalformedAuthorization},
		{"another scheme", "Basic " + jwt, "", ErrMalformedAuthorization},
		{"a Kelvin sign is not a k (no Unicode folding)", "Bearer\u212a", "", ErrMalformedAuthorization},
		{"two tokens", "Bearer " + jwt + " " + jwt, "", ErrMalformedAuthorization},
		{"a comma-separated second credential", "Bearer " + jwt + ",Basic x", "", ErrMalformedAuthorization},
		{"padding inside the token", "Bearer ab=c", "", ErrMalformedAuthorization},
		{"padding alone", "Bearer ==", "", ErrMalformedAuthorization},
		{"a token without the scheme", jwt, "", ErrMalformedAuthorization},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseBearer(tc.header)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("ParseBearer(%q) = %q, %v; want %q, %v", tc.header, got, err, tc.want, tc.err)
			}
		})
	}
}

// bearerGrammar is ParseBearer's rule written as a regular expression (the
// scheme's letters spelt out: (?i) would also fold the Kelvin sign).
var bearerGrammar = regexp.MustCompile(`^[Bb][Ee][Aa][Rr][Ee][Rr] ([A-Za-z0-9._~+/-]+=*)$`)

// FuzzParseBearer: ParseBearer accepts exactly the grammar and returns the
// token the grammar names.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Bearer\tabc", "Bearer\u00a0abc", "Bearer  abc", "Bearer abc ", "Bearer ", "Bearer a==", "Bearer\u212a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, err := ParseBearer(h)
		m := bearerGrammar.FindStringSubmatch(h)
		switch {
		case m != nil && (err != nil || got != m[1]):
			t.Fatalf("ParseBearer(%q) = %q, %v; the grammar accepts %q", h, got, err, m[1])
		case m == nil && err == nil:
			t.Fatalf("ParseBearer(%q) accepted %q; the grammar refuses it", h, got)
		}
	})
}
