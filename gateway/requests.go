package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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

// createRequest is POST /v1/sandboxes.
type createRequest struct {
	Profile     *string           `json:"profile"`
	Network     *string           `json:"network"`
	TTLSeconds  *int64            `json:"ttl_seconds"`
	Node        *string           `json:"node"`
	CPUMHz      *int64            `json:"cpu_mhz"`
	MemoryMB    *int64            `json:"memory_mb"`
	Image       *string           `json:"image"`
	Labels      map[string]string `json:"labels"`
	WaitSeconds *int64            `json:"wait_seconds"`
	// ReissueToken asks a create repeated with its Idempotency-Key for a
	// fresh session token (T4).
	ReissueToken *bool `json:"reissue_token"`
}

func (r *createRequest) required() bool { return false }

func (r *createRequest) policyBody() policies.RequestBody {
	return policies.RequestBody{
		Profile: r.Profile, Network: r.Network, TTLSeconds: r.TTLSeconds,
		CPUMHz: r.CPUMHz, MemoryMB: r.MemoryMB, Image: r.Image, Node: r.Node,
		ReissueToken: r.ReissueToken,
	}
}

var labelKey = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

const (
	maxLabels         = 16
	maxLabelValueSize = 256
)

func (r *createRequest) check(s *Server) error {
	if len(r.Labels) > maxLabels {
		return invalid("labels", "at most %d labels", maxLabels)
	}
	for k, v := range r.Labels {
		if !labelKey.MatchString(k) {
			return invalid("labels", "key %q must match %s", k, labelKey)
		}
		if len(v) > maxLabelValueSize || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return invalid("labels."+k, "must be UTF-8 text of at most %d bytes", maxLabelValueSize)
		}
	}
	if r.WaitSeconds != nil {
		if maxW := int64(s.cfg.MaxWait.Seconds()); *r.WaitSeconds < 0 || *r.WaitSeconds > maxW {
			return invalid("wait_seconds", "must be an integer in [0, %d]", maxW)
		}
	}
	return nil
}

// execRequest is POST /v1/sandboxes/{id}/exec.
type execRequest struct {
	Argv  []string `json:"argv"`
	Stdin *string  `json:"stdin"`
	// StdinBase64 is stdin as standard base64, for bytes that are not
	// UTF-8 text; at most one of stdin and stdin_base64.
	StdinBase64    *string           `json:"stdin_base64"`
	TimeoutSeconds *int64            `json:"timeout_seconds"`
	Workdir        *string           `json:"workdir"`
	Env            map[string]string `json:"env"`
	// MaxOutputBytes caps each of stdout and stderr below the policy's
	// exec.max_output_bytes (E2), which is also the default.
	MaxOutputBytes *int64 `json:"max_output_bytes"`

	stdin    []byte // stdin or the decoded stdin_base64
	stdinErr error  // stdin_base64 that does not decode
	decoded  bool
}

func (r *execRequest) required() bool { return true }

// stdinBytes returns what the command reads on stdin, decoding
// stdin_base64 once.
func (r *execRequest) stdinBytes() ([]byte, error) {
	if !r.decoded {
		r.decoded = true
		switch {
		case r.StdinBase64 != nil:
			r.stdin, r.stdinErr = base64.StdEncoding.DecodeString(*r.StdinBase64)
		case r.Stdin != nil:
			r.stdin = []byte(*r.Stdin)
		}
	}
	return r.stdin, r.stdinErr
}

func (r *execRequest) policyBody() policies.RequestBody {
	b := policies.RequestBody{Argv: r.Argv, TimeoutSeconds: r.TimeoutSeconds, MaxOutputBytes: r.MaxOutputBytes}
	if r.Stdin != nil || r.StdinBase64 != nil {
		in, err := r.stdinBytes()
		n := int64(len(in))
		if err != nil { // refused by check as 400; the bound holds meanwhile
			n = int64(len(*r.StdinBase64))
		}
		b.StdinBytes = &n
	}
	if r.Env != nil {
		n, size := int64(len(r.Env)), int64(0)
		names := make([]string, 0, len(r.Env))
		for k, v := range r.Env {
			size += int64(len(k) + 1 + len(v))
			names = append(names, k)
		}
		slices.Sort(names)
		b.EnvCount, b.EnvBytes, b.EnvNames = &n, &size, names
	}
	b.Workdir = r.Workdir
	return b
}

// check refuses what the wrapper cannot carry, whatever the policy
// allows; the policy judges names (E1: exec.env_name_pattern and
// exec.reserved_env_prefixes), sizes (E1, E2) and the workdir (E1: a
// normalised absolute path under one of exec.workdir_roots). The workdir
// test here only adds a refusal under a bundle that would let a relative
// or NUL-holding path through: it is never what confines the workdir.
func (r *execRequest) check(*Server) error {
	if len(r.Argv) > 0 && strings.Contains(r.Argv[0], "=") {
		return invalid("argv[0]", "must name a program, not an assignment (no '=')")
	}
	if r.Stdin != nil && r.StdinBase64 != nil {
		return invalid("stdin_base64", "give stdin or stdin_base64, not both")
	}
	if _, err := r.stdinBytes(); err != nil {
		return invalid("stdin_base64", "is not standard base64 (RFC 4648, with padding): %v", err)
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid("env", "name %q must be non-empty, without '=' or NUL", k)
		}
		if strings.ContainsRune(v, 0) {
			return invalid("env."+k, "must not contain a NUL byte")
		}
	}
	if r.Workdir != nil {
		w := *r.Workdir
		if !strings.HasPrefix(w, "/") || strings.ContainsRune(w, 0) {
			return invalid("workdir", "must be an absolute path without NUL bytes")
		}
	}
	return nil
}

// extendRequest is POST /v1/sandboxes/{id}/extend.
type extendRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

func (r *extendRequest) required() bool { return true }

func (r *extendRequest) policyBody() policies.RequestBody {
	return policies.RequestBody{TTLSeconds: r.TTLSeconds}
}

func (r *extendRequest) check(*Server) error {
	if r.TTLSeconds == nil {
		return invalid("ttl_seconds", "is required")
	}
	return nil
}

// logsQuery reads ?stream=&tail_bytes= for the policy; a tail_bytes that
// is not an integer is a 400 naming it.
func logsQuery(c echo.Context) (policies.RequestQuery, error) {
	var q policies.RequestQuery
	q.Stream = c.QueryParam("stream")
	if v := c.QueryParam("tail_bytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return q, invalid("tail_bytes", "must be an integer, got %q", truncate(v, 32))
		}
		q.TailBytes = &n
	}
	return q, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", s[:n])
}
