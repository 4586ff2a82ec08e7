package policies

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func ptr[T any](v T) *T { return &v }

// viaJSON is the reference conversion: the documented JSON, parsed by OPA.
func viaJSON(t *testing.T, v any) ast.Value {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	val, err := ParseInputBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return val
}

func TestTheHandBuiltAuthzInputEqualsItsJSON(t *testing.T) {
	t.Parallel()
	cases := map[string]*AuthzInput{
		"every field set": {
			Now: 1764406800,
			Request: Request{
				Method: "POST", Route: "/v1/sandboxes/:id/exec", Params: map[string]string{"id": "k7x2m9p4q8r5t1v6"},
				Query:          RequestQuery{Stream: "stdout", TailBytes: ptr[int64](4096), Path: ptr("/workspace/./x"), Mode: ptr("0644"), Offset: ptr[int64](5), Length: ptr[int64](7)},
				File:           &FileRequest{Path: "/workspace/x", Bytes: ptr[int64](10), Mode: ptr[int64](0o644)},
				IdempotencyKey: true,
				Body: RequestBody{
					Profile: ptr("strict"), Network: ptr("none"), TTLSeconds: ptr[int64](3600), CPUMHz: ptr[int64](500),
					MemoryMB: ptr[int64](512), Image: ptr("ubuntu:24.04"), Node: ptr("w1"), ReissueToken: ptr(true),
					Argv: []string{"echo", "hi"}, TimeoutSeconds: ptr[int64](30), StdinBytes: ptr[int64](0), EnvCount: ptr[int64](2),
					EnvBytes: ptr[int64](9), EnvNames: []string{"HOME"}, Workdir: ptr("/workspace"), MaxOutputBytes: ptr[int64](1024), Role: ptr("agent"), Label: ptr("ci"), Subject: ptr("ci-agent"),
					Quota: &MintQuota{MaxLiveSandboxes: ptr[int64](3)},
				},
			},
			Token: &TokenFacts{Role: "session", Sub: "session:k7x2m9p4q8r5t1v6", Scopes: []string{"status", "exec"},
				SandboxID: "k7x2m9p4q8r5t1v6", Exp: 1764410400, JTI: "j1", Active: true},
			Sandbox: &SandboxRecord{ID: "k7x2m9p4q8r5t1v6", JobID: "sandgate-sbx-k7x2m9p4q8r5t1v6", Principal: "agent:ci",
				State: "running", Profile: "strict", Network: "none", Node: "w1", CreatedAt: 1, ExpiresAt: 2, CeilingAt: 3},
		},
		"only the request": {Request: Request{Method: "GET", Route: "/v1/sandboxes"}},
		"an empty argv is kept, a nil one left out": {
			Request: Request{Body: RequestBody{Argv: []string{}}},
			Token:   &TokenFacts{Scopes: []string{}},
		},
	}
	// "every field set" must set every field: a field added to the body but
	// not to the hand-built value would otherwise never reach the policy.
	for _, v := range []any{cases["every field set"].Request.Body, cases["every field set"].Request.Query, *cases["every field set"].Request.File} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Fatalf("the \"every field set\" case leaves %s.%s unset", rv.Type().Name(), rv.Type().Field(i).Name)
			}
		}
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, want := in.Value(), viaJSON(t, in)
			if got.Compare(want) != 0 {
				t.Fatalf("hand-built input differs from its JSON:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestTheHandBuiltAdmissionInputEqualsItsJSON(t *testing.T) {
	t.Parallel()
	in := &AdmissionInput{
		Now:     1764406800,
		Sandbox: SandboxFacts{ID: "k7x2m9p4q8r5t1v6", Profile: "strict", Network: "none", Principal: "agent:ci", CreatedAt: 1764406800, CeilingAt: 1764421200},
		Job:     []byte(`{"ID": "sandgate-sbx-k7x2m9p4q8r5t1v6", "Priority": 10, "TaskGroups": [{"Count": 1}]}`),
		Node: NodeFacts{ID: "n1", Name: "w1", Status: "ready", Eligibility: "eligible", Drain: true,
			Attributes: map[string]string{"cpu.arch": "arm64"}, Meta: map[string]string{"k": "v"}, ControlPlane: true,
			OperatorState: "active", Enrollment: "sandbox", Usage: NodeUsage{MemoryPercent: ptr(41.5), DiskPercent: ptr(22.0)},
			Capacity: &NodeCapacity{Allocatable: Resources{CPUMHz: 5192, MemoryMB: 24105}, Others: Resources{CPUMHz: 100}, Sandboxes: Resources{MemoryMB: 64}}},
		Budget: Budget{Limits: BudgetLimits{MaxSandboxes: 10, CPUMHz: 8000, MemoryMB: 16384}, Used: BudgetUse{Sandboxes: 3, CPUMHz: 1500, MemoryMB: 1536}},
		NomadMounts: []NomadMount{
			{Target: "/alloc", HostDisk: true},
			{Target: "/secrets", NoExec: true, TmpfsMB: 1},
		},
	}
	got, err := in.Value()
	if err != nil {
		t.Fatal(err)
	}
	if want := viaJSON(t, in); got.Compare(want) != 0 {
		t.Fatalf("hand-built input differs from its JSON:\n got %v\nwant %v", got, want)
	}
	for _, sparse := range []*AdmissionInput{{}, {NomadMounts: []NomadMount{}}} {
		got, err = sparse.Value()
		if err != nil {
			t.Fatal(err)
		}
		if want := viaJSON(t, sparse); got.Compare(want) != 0 {
			t.Fatalf("sparse input differs from its JSON:\n got %v\nwant %v", got, want)
		}
	}
}

func TestAnAdmissionJobThatIsNotAnObjectIsAnError(t *testing.T) {
	t.Parallel()
	for _, job := range []string{`[1]`, `"job"`, `{"ID": `, `null`} {
		in := &AdmissionInput{Job: []byte(job)}
		if _, err := in.Value(); err == nil {
			t.Errorf("job %s accepted", job)
		}
	}
}

func TestSumUseAddsEveryLiveSandbox(t *testing.T) {
	t.Parallel()
	got := SumUse([]LiveSandbox{{CPUMHz: 500, MemoryMB: 512}, {CPUMHz: 250, MemoryMB: 128}})
	if got != (BudgetUse{Sandboxes: 2, CPUMHz: 750, MemoryMB: 640}) {
		t.Fatalf("SumUse = %+v", got)
	}
	if SumUse(nil) != (BudgetUse{}) {
		t.Fatal("SumUse(nil) is not zero")
	}
}

func TestParseInputAcceptsOnlyAnObject(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `[]`, `1`, `"x"`, `null`, `{`, `{"a": 1} {"b": 2}`} {
		if _, err := ParseInput(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseInput(%q) accepted", bad)
		}
	}
	if _, err := ParseInput(strings.NewReader(`{"a": [1, {"b": null}]}`)); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseInput: untrusted input documents (the CLI, the dry-run endpoint)
// never panic the parser, and whatever parses is an object that both
// entrypoints decide on without an error.
func FuzzParseInput(f *testing.F) {
	for _, seed := range []string{`{}`, `{"request": {"method": "GET"}}`, `{"job": {"TaskGroups": [{"Tasks": [{"Config": {"privileged": true}}]}]}}`, `[`, `{"now": 1e400}`} {
		f.Add([]byte(seed))
	}
	e := newEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseInput(bytes.NewReader(data))
		if err != nil {
			return
		}
		if _, ok := v.(ast.Object); !ok {
			t.Fatalf("ParseInput returned %T", v)
		}
		for _, ep := range Entrypoints {
			d, err := e.Decide(t.Context(), ep, v)
			if err == nil && d.Allow && len(data) < 8 {
				t.Fatalf("%s allowed a tiny document %q", ep, data)
			}
		}
	})
}

func TestTheHandBuiltLifecycleInputEqualsItsJSON(t *testing.T) {
	t.Parallel()
	cases := map[string]*LifecycleInput{
		"an end with its record": {
			Now: 1764410000, Action: "end", Reason: "expired",
			Job:     LifecycleJob{ID: "sandgate-sbx-k7x2m9p4q8r5t1v6", Present: true},
			Sandbox: &SandboxRecord{ID: "k7x2m9p4q8r5t1v6", JobID: "sandgate-sbx-k7x2m9p4q8r5t1v6", State: "running", ExpiresAt: 2, CeilingAt: 3},
			Effects: LifecycleEffects{PurgeJob: true, RevokeToken: true, ReleaseBudget: true},
		},
		"an orphan purge without a record": {Action: "purge", Reason: "orphan", Job: LifecycleJob{ID: "sandgate-sbx-x"}},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, want := in.Value(), viaJSON(t, in)
			if got.Compare(want) != 0 {
				t.Fatalf("hand-built input differs from its JSON:\n got %v\nwant %v", got, want)
			}
		})
	}
}
