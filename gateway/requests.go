package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"sandgate/policies"
)

// requestBody is a route's JSON body: decoded strictly before the policy
// decision, which sees the fields through policyBody. check holds the
// gateway's own checks for what the policy does not judge (defence in
// depth; it never allows what the policy denies).
type requestBody interface {
	policyBody() policies.RequestBody
	check(s *Server) error
	// required reports whether an empty body is an error.
	required() bool
}

// decodeBody reads at most limit bytes and decodes one JSON object into v,
// refusing unknown fields, wrong types and trailing data with a 400 that
// names the field.
func decodeBody(r io.Reader, v requestBody) error {
	data, err := io.ReadAll(r)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he
		}
		return invalid("body", "could not be read: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if v.required() {
			return invalid("body", "a JSON object is required")
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if dec.More() {
		return invalid("body", "must hold exactly one JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("body", "must hold exactly one JSON object")
	}
	return nil
}

// jsonProblem turns a decoding error into a 400 naming the field.
func jsonProblem(err error) *Problem {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return invalid(field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return invalid("body", "is not valid JSON (offset %d)", se.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalid(name, "is not a known field")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("body", "is truncated JSON")
	}
	return invalid("body", "is not a JSON object: %v", err)
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "a value"
	}
	return "a " + k
}

var labelKey = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

const (
	maxLabels         = 16
	maxLabelValueSize = 256
)
