package policies

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// The input documents are built by hand as ast.Values: OPA then skips the
// JSON-style normalisation a Go map costs on every call. The json tags give
// the same document as JSON (docs/policies.md); a test holds the two equal.
// Zero values are left out (omitempty), so a missing fact is missing for the
// policy too, and the policy denies on it.

// AuthzInput is the input of data.sandgate.authz.decision.
type AuthzInput struct {
	Now     int64          `json:"now,omitempty"` // unix seconds
	Request Request        `json:"request"`
	Token   *TokenFacts    `json:"token,omitempty"`
	Sandbox *SandboxRecord `json:"sandbox,omitempty"` // the record the route targets, if any
}

// Request is the HTTP request as the policy sees it.
type Request struct {
	Method string            `json:"method,omitempty"`
	Route  string            `json:"route,omitempty"` // Echo route template, e.g. /v1/sandboxes/:id
	Params map[string]string `json:"params,omitempty"`
	Query  RequestQuery      `json:"query"`
	Body   RequestBody       `json:"body"`
	// File holds what the gateway made of a files request (F1, F2).
	File *FileRequest `json:"file,omitempty"`
	// IdempotencyKey: the request carries an Idempotency-Key header (a
	// create; T4 judges reissue_token by it).
	IdempotencyKey bool `json:"idempotency_key,omitempty"`
}

// RequestQuery holds the query parameters that matter to the policy.
type RequestQuery struct {
	Stream    string `json:"stream,omitempty"`     // logs: stdout or stderr
	TailBytes *int64 `json:"tail_bytes,omitempty"` // logs: bytes from the end
	// Path and Mode are a files request's ?path= and ?mode=, as given.
	Path *string `json:"path,omitempty"`
	Mode *string `json:"mode,omitempty"`
	// Offset and Length are a file read's ?offset=&length= (F2).
	Offset *int64 `json:"offset,omitempty"`
	Length *int64 `json:"length,omitempty"`
}

// FileRequest is a files request as the gateway understood it.
type FileRequest struct {
	// Path is query.path normalised (path.Clean of an absolute path; ""
	// for a relative one), the path the policy confines (F1).
	Path string `json:"path"`
	// Bytes is a PUT's Content-Length (F2); nil when it has none.
	Bytes *int64 `json:"bytes,omitempty"`
	// Mode is a PUT's ?mode= parsed as octal (F2); nil when absent.
	Mode *int64 `json:"mode,omitempty"`
}

// RequestBody holds the body fields that matter to the policy; nil means the
// client left the field out.
type RequestBody struct {
	// create
	Profile    *string `json:"profile,omitempty"`
	Network    *string `json:"network,omitempty"`
	TTLSeconds *int64  `json:"ttl_seconds,omitempty"` // create and extend
	CPUMHz     *int64  `json:"cpu_mhz,omitempty"`
	MemoryMB   *int64  `json:"memory_mb,omitempty"`
	Image      *string `json:"image,omitempty"`
	Node       *string `json:"node,omitempty"`
	// ReissueToken asks a repeated create for a fresh session token.
	ReissueToken *bool `json:"reissue_token,omitempty"`
	// exec
	Argv           []string `json:"argv,omitzero"` // nil: absent; empty: present and empty
	TimeoutSeconds *int64   `json:"timeout_seconds,omitempty"`
	StdinBytes     *int64   `json:"stdin_bytes,omitempty"` // length of stdin, computed by the gateway
	EnvCount       *int64   `json:"env_count,omitempty"`   // number of env entries, computed by the gateway
	// EnvBytes is the size of the env entries as the wrapper receives them
	// (len(NAME)+1+len(value) each), computed by the gateway.
	EnvBytes *int64 `json:"env_bytes,omitempty"`
	// EnvNames are the env entries' names, sorted (E1 judges each).
	EnvNames []string `json:"env_names,omitzero"`
	Workdir  *string  `json:"workdir,omitempty"`
	// MaxOutputBytes is the cap the caller asks for each output stream (E2).
	MaxOutputBytes *int64 `json:"max_output_bytes,omitempty"`
	// token mint (ttl_seconds above)
	Role    *string    `json:"role,omitempty"`
	Label   *string    `json:"label,omitempty"`
	Subject *string    `json:"subject,omitempty"`
	Quota   *MintQuota `json:"quota,omitempty"`
}

// MintQuota is the quota asked for a minted agent token (B3).
type MintQuota struct {
	MaxLiveSandboxes *int64 `json:"max_live_sandboxes,omitempty"`
}

// TokenFacts are the verified claims of the caller's token.
type TokenFacts struct {
	Role      string   `json:"role,omitempty"` // operator, agent or session
	Sub       string   `json:"sub,omitempty"`
	Scopes    []string `json:"scopes,omitzero"`
	SandboxID string   `json:"sandbox_id,omitempty"` // session tokens only
	Exp       int64    `json:"exp,omitempty"`        // unix seconds
	JTI       string   `json:"jti,omitempty"`
	// Active is the gateway's verdict from the store: the token is known and
	// not revoked and, for a session token, its digest matches the live record.
	Active bool `json:"active"`
}

// SandboxRecord is the stored record a request targets.
type SandboxRecord struct {
	ID        string `json:"id,omitempty"`
	JobID     string `json:"job_id,omitempty"`
	Principal string `json:"principal,omitempty"`
	State     string `json:"state,omitempty"`
	Profile   string `json:"profile,omitempty"`
	Network   string `json:"network,omitempty"`
	Node      string `json:"node,omitempty"`
	CreatedAt int64  `json:"created_at,omitempty"`
	ExpiresAt int64  `json:"expires_at,omitempty"`
	CeilingAt int64  `json:"ceiling_at,omitempty"`
}

// Value builds the input document as an ast.Value.
func (in *AuthzInput) Value() ast.Value {
	o := ast.NewObjectWithCapacity(4)
	putInt(o, "now", in.Now)
	req := ast.NewObjectWithCapacity(5)
	putString(req, "method", in.Request.Method)
	putString(req, "route", in.Request.Route)
	if len(in.Request.Params) > 0 {
		p := ast.NewObjectWithCapacity(len(in.Request.Params))
		for k, v := range in.Request.Params {
			p.Insert(ast.StringTerm(k), ast.StringTerm(v))
		}
		req.Insert(ast.InternedTerm("params"), ast.NewTerm(p))
	}
	q := ast.NewObjectWithCapacity(2)
	putString(q, "stream", in.Request.Query.Stream)
	putIntPtr(q, "tail_bytes", in.Request.Query.TailBytes)
	putStringPtr(q, "path", in.Request.Query.Path)
	putStringPtr(q, "mode", in.Request.Query.Mode)
	putIntPtr(q, "offset", in.Request.Query.Offset)
	putIntPtr(q, "length", in.Request.Query.Length)
	req.Insert(ast.InternedTerm("query"), ast.NewTerm(q))
	if f := in.Request.File; f != nil {
		fo := ast.NewObjectWithCapacity(3)
		fo.Insert(ast.InternedTerm("path"), ast.StringTerm(f.Path))
		putIntPtr(fo, "bytes", f.Bytes)
		putIntPtr(fo, "mode", f.Mode)
		req.Insert(ast.InternedTerm("file"), ast.NewTerm(fo))
	}
	req.Insert(ast.InternedTerm("body"), ast.NewTerm(in.Request.Body.value()))
	if in.Request.IdempotencyKey {
		req.Insert(ast.InternedTerm("idempotency_key"), ast.InternedTerm(true))
	}
	o.Insert(ast.InternedTerm("request"), ast.NewTerm(req))
	if t := in.Token; t != nil {
		to := ast.NewObjectWithCapacity(7)
		putString(to, "role", t.Role)
		putString(to, "sub", t.Sub)
		putStrings(to, "scopes", t.Scopes)
		putString(to, "sandbox_id", t.SandboxID)
		putInt(to, "exp", t.Exp)
		putString(to, "jti", t.JTI)
		to.Insert(ast.InternedTerm("active"), ast.InternedTerm(t.Active))
		o.Insert(ast.InternedTerm("token"), ast.NewTerm(to))
	}
	if s := in.Sandbox; s != nil {
		o.Insert(ast.InternedTerm("sandbox"), ast.NewTerm(s.value()))
	}
	return o
}

func (b *RequestBody) value() ast.Object {
	o := ast.NewObjectWithCapacity(4)
	putStringPtr(o, "profile", b.Profile)
	putStringPtr(o, "network", b.Network)
	putIntPtr(o, "ttl_seconds", b.TTLSeconds)
	putIntPtr(o, "cpu_mhz", b.CPUMHz)
	putIntPtr(o, "memory_mb", b.MemoryMB)
	putStringPtr(o, "image", b.Image)
	putStringPtr(o, "node", b.Node)
	if b.ReissueToken != nil {
		o.Insert(ast.InternedTerm("reissue_token"), ast.InternedTerm(*b.ReissueToken))
	}
	putStrings(o, "argv", b.Argv)
	putIntPtr(o, "timeout_seconds", b.TimeoutSeconds)
	putIntPtr(o, "stdin_bytes", b.StdinBytes)
	putIntPtr(o, "env_count", b.EnvCount)
	putIntPtr(o, "env_bytes", b.EnvBytes)
	putStrings(o, "env_names", b.EnvNames)
	putIntPtr(o, "max_output_bytes", b.MaxOutputBytes)
	putStringPtr(o, "workdir", b.Workdir)
	putStringPtr(o, "role", b.Role)
	putStringPtr(o, "label", b.Label)
	putStringPtr(o, "subject", b.Subject)
	if b.Quota != nil {
		q := ast.NewObjectWithCapacity(1)
		putIntPtr(q, "max_live_sandboxes", b.Quota.MaxLiveSandboxes)
		o.Insert(ast.InternedTerm("quota"), ast.NewTerm(q))
	}
	return o
}

func (s *SandboxRecord) value() ast.Object {
	o := ast.NewObjectWithCapacity(10)
	putString(o, "id", s.ID)
	putString(o, "job_id", s.JobID)
	putString(o, "principal", s.Principal)
	putString(o, "state", s.State)
	putString(o, "profile", s.Profile)
	putString(o, "network", s.Network)
	putString(o, "node", s.Node)
	putInt(o, "created_at", s.CreatedAt)
	putInt(o, "expires_at", s.ExpiresAt)
	putInt(o, "ceiling_at", s.CeilingAt)
	return o
}

// ParseInput reads one JSON input document (for `sandgate policy eval` and
// the dry-run endpoint). Only a single object is an input: anything after it
// is an error.
func ParseInput(r io.Reader) (ast.Value, error) {
	dec := util.NewJSONDecoder(r)
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("policies: parse input: %w", err)
	}
	if err := dec.Decode(new(any)); !errors.Is(err, io.EOF) {
		return nil, errors.New("policies: parse input: more than one JSON value")
	}
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		return nil, fmt.Errorf("policies: parse input: %w", err)
	}
	if _, ok := v.(ast.Object); !ok {
		return nil, fmt.Errorf("policies: parse input: the input must be a JSON object, not %s", ast.ValueName(v))
	}
	return v, nil
}

// ParseInputBytes is ParseInput over a byte slice.
func ParseInputBytes(b []byte) (ast.Value, error) { return ParseInput(bytes.NewReader(b)) }

func putString(o ast.Object, k, v string) {
	if v != "" {
		o.Insert(ast.InternedTerm(k), ast.StringTerm(v))
	}
}

func putStringPtr(o ast.Object, k string, v *string) {
	if v != nil {
		o.Insert(ast.InternedTerm(k), ast.StringTerm(*v))
	}
}

func putInt(o ast.Object, k string, v int64) {
	if v != 0 {
		o.Insert(ast.InternedTerm(k), ast.InternedTerm(v))
	}
}

func putIntPtr(o ast.Object, k string, v *int64) {
	if v != nil {
		o.Insert(ast.InternedTerm(k), ast.InternedTerm(*v))
	}
}

func putFloatPtr(o ast.Object, k string, v *float64) {
	if v != nil {
		o.Insert(ast.InternedTerm(k), ast.FloatNumberTerm(*v))
	}
}

// putStrings inserts a string array. A nil slice is left out while an empty
// non-nil one is kept (an empty argv is a fact too), as json's omitzero does.
func putStrings(o ast.Object, k string, v []string) {
	if v == nil {
		return
	}
	ts := make([]*ast.Term, len(v))
	for i, s := range v {
		ts[i] = ast.StringTerm(s)
	}
	o.Insert(ast.InternedTerm(k), ast.ArrayTerm(ts...))
}

// putStringMap inserts a string map; a nil map is null, as in its JSON.
func putStringMap(o ast.Object, k string, m map[string]string) {
	if m == nil {
		o.Insert(ast.InternedTerm(k), ast.NullTerm())
		return
	}
	mo := ast.NewObjectWithCapacity(len(m))
	for mk, mv := range m {
		mo.Insert(ast.StringTerm(mk), ast.StringTerm(mv))
	}
	o.Insert(ast.InternedTerm(k), ast.NewTerm(mo))
}
