package policies

import (
	"context"
	"encoding/json"
	"flag"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

// The benchmarks report each decision on its production path (the input built
// by hand as an ast.Value, EvalParsedInput, the result checked into a
// Decision) next to two baselines in the same run: the naive path (the same
// structs marshalled into a Go map per request and handed to OPA with
// rego.EvalInput, which normalises it again) and the floor of any OPA call
// (BenchmarkOPAFloor). docs/benchmarks.md has the figures and the ratios.

func benchAuthzInput() *AuthzInput {
	return &AuthzInput{
		Now: 1764406800,
		Request: Request{
			Method: "POST", Route: "/v1/sandboxes/:id/exec", Params: map[string]string{"id": "k7x2m9p4q8r5t1v6"},
			Body: RequestBody{Argv: []string{"python3", "-c", "print(42)"}, TimeoutSeconds: ptr[int64](30), StdinBytes: ptr[int64](0),
				EnvCount: ptr[int64](1), EnvNames: []string{"LANG"}, EnvBytes: ptr[int64](int64(len("LANG=C.UTF-8")))},
		},
		Token: &TokenFacts{Role: "session", Sub: "session:k7x2m9p4q8r5t1v6", Scopes: []string{"status", "exec", "logs", "destroy"},
			SandboxID: "k7x2m9p4q8r5t1v6", Exp: 1764410400, JTI: "01JDQ8Z6", Active: true},
		Sandbox: &SandboxRecord{ID: "k7x2m9p4q8r5t1v6", JobID: "sandgate-sbx-k7x2m9p4q8r5t1v6", Principal: "agent:ci", State: "running",
			Profile: "strict", Network: "none", Node: "w1", CreatedAt: 1764406000, ExpiresAt: 1764410400, CeilingAt: 1764420400},
	}
}

// benchAdmission returns the admission input of a rendered strict job on a
// node with 50 live sandboxes, and those sandboxes.
func benchAdmission(b *testing.B) (*AdmissionInput, []LiveSandbox) {
	fx, ok := loadFixtures(b)["admission-strict-none-allowed.json"]
	if !ok {
		b.Fatal("fixture admission-strict-none-allowed.json is missing")
	}
	var in struct {
		AdmissionInput
		Job json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(fx.Input, &in); err != nil {
		b.Fatal(err)
	}
	in.AdmissionInput.Job = in.Job
	live := make([]LiveSandbox, 50)
	for i := range live {
		live[i] = LiveSandbox{CPUMHz: 100, MemoryMB: 128}
	}
	in.Budget.Limits = BudgetLimits{MaxSandboxes: 64, CPUMHz: 16000, MemoryMB: 32768}
	return &in.AdmissionInput, live
}

// benchOnce tells whether this is the once-through run CI makes of every
// benchmark (-benchtime 1x, docs/benchmarks.md): one sample measures
// nothing, so a benchmark may cut what only matters to a measurement.
func benchOnce() bool {
	f := flag.Lookup("test.benchtime")
	return f != nil && f.Value.String() == "1x"
}

// servingEngine is the embedded bundle's engine, built once for every
// decision benchmark: a build takes seconds (tens under -race on a busy
// machine) and the decisions never change it.
var servingEngine = sync.OnceValues(func() (*Engine, error) { return New(context.Background(), Config{}) })

func benchEngine(b *testing.B) *Engine {
	b.Helper()
	e, err := servingEngine()
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	return e
}

// asMap converts a document to the Go map a naive caller would pass.
func asMap(b *testing.B, v any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatal(err)
	}
	return m
}

// mustAllow fails the benchmark loudly when its input was not allowed: a
// benchmark that measured a denial would report a path nobody takes.
func mustAllow(b *testing.B, d Decision, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	if !d.Allow {
		b.Fatalf("benchmark input was denied: %+v", d.Violations)
	}
}

// mustAllowResult is mustAllow for a raw OPA result (the baselines).
func mustAllowResult(b *testing.B, rs rego.ResultSet, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	var d Decision
	if err := d.fill(rs); err != nil {
		b.Fatal(err)
	}
	mustAllow(b, d, nil)
}

func BenchmarkAuthzDecision(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	in := benchAuthzInput()
	b.Run("ast-input", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := e.Decide(ctx, Authz, in.Value())
			mustAllow(b, d, err)
		}
	})
	b.Run("baseline-go-map", func(b *testing.B) {
		pq := e.cur.Load().queries[Authz]
		b.ReportAllocs()
		for b.Loop() {
			rs, err := pq.Eval(ctx, rego.EvalInput(asMap(b, in)))
			mustAllowResult(b, rs, err)
		}
	})
}

func BenchmarkAdmissionDecision(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	in, live := benchAdmission(b)
	b.Run("ast-input", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in.Budget.Used = SumUse(live)
			v, err := in.Value()
			if err != nil {
				b.Fatal(err)
			}
			d, err := e.Decide(ctx, Admission, v)
			mustAllow(b, d, err)
		}
	})
	b.Run("baseline-go-map", func(b *testing.B) {
		pq := e.cur.Load().queries[Admission]
		b.ReportAllocs()
		for b.Loop() {
			in.Budget.Used = SumUse(live)
			rs, err := pq.Eval(ctx, rego.EvalInput(asMap(b, in)))
			mustAllowResult(b, rs, err)
		}
	})
}

// BenchmarkOPAFloor is the cost of any OPA call on this machine: a trivial
// query on the same hand-built authz input. The decisions are reported as
// multiples of it.
func BenchmarkOPAFloor(b *testing.B) {
	pq, err := rego.New(rego.Query("x := input.now"), rego.StoreReadAST(true)).PrepareForEval(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	in := benchAuthzInput()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pq.Eval(context.Background(), rego.EvalParsedInput(in.Value())); err != nil {
			b.Fatal(err)
		}
	}
}
