package policies

import "github.com/open-policy-agent/opa/v1/ast"

// IsolationInput is the input of data.sandgate.isolation.decision: the plan
// of a host isolation script (rules I1-I4) that `sandgate isolation render`
// is about to print.
type IsolationInput struct {
	// Plan is the rendered script's plan: any value whose JSON form is the
	// plan object that policies/isolation/isolation.rego reads (the CLI
	// passes render/isolation's *Plan, which policies cannot import). nil
	// leaves the plan out, and the policy denies.
	Plan any `json:"plan,omitempty"`
}

// Value builds the input document. A plan is decided once per render: a
// JSON round trip is clear and cheap enough.
func (in *IsolationInput) Value() (ast.Value, error) { return jsonValue("isolation", in) }
