package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Masked replaces every value MaskInput takes out of an input.
const Masked = "[masked]"

// secretKeys are member names whose values never reach the log, at any
// depth of an input: a bearer token or its digest, exec stdin, the values
// of environment variables, and anything named like a credential. The
// policy inputs sandgate builds carry none of them (exec stdin and env are
// counted, not passed; a token is its verified claims); the mask is the
// second line, for an input a future field or a hand-written document
// brings.
var secretKeys = map[string]bool{
	"token_digest": true, "token_sha256": true, "token_hash": true, "session_token": true,
	"bearer": true, "authorization": true, "raw_token": true, "jwt": true,
	"stdin": true, "stdin_base64": true,
	"password": true, "secret": true, "private_key": true, "api_key": true,
}

// envKeys are members holding environment variables: their names stay,
// their values are masked.
var envKeys = map[string]bool{"env": true, "Env": true, "environment": true}

// MaskInput returns the input document with every secret value replaced
// by Masked (see secretKeys), and environment variables kept by name only.
// A document that is not JSON is an error: nothing is logged rather than
// something unmasked.
func MaskInput(doc []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("audit: mask input: %w", err)
	}
	out, err := json.Marshal(mask(v, ""))
	if err != nil {
		return nil, fmt.Errorf("audit: mask input: %w", err)
	}
	return out, nil
}

func mask(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch {
			case secretKeys[strings.ToLower(k)]:
				x[k] = Masked
			case envKeys[k]:
				x[k] = maskEnv(val)
			default:
				x[k] = mask(val, k)
			}
		}
		return x
	case []any:
		for i := range x {
			x[i] = mask(x[i], key)
		}
		return x
	}
	return v
}

// maskEnv keeps the names of an environment (a map, or a list of
// NAME=value strings) and masks every value; a string is masked whole. A
// boolean, number or null is no value of a variable and stays (Nomad's
// Identity.Env is a boolean the policy checks).
func maskEnv(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k := range x {
			x[k] = Masked
		}
		return x
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			name, _, found := strings.Cut(s, "=")
			if !ok || !found {
				x[i] = Masked
				continue
			}
			x[i] = name + "=" + Masked
		}
		return x
	case string:
		return Masked
	}
	return v
}
