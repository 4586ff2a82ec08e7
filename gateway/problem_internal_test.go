package gateway

import (
	"testing"

	"sandgate/gateway/apidoc"
	"sandgate/gateway/wire"
)

// The OpenAPI document knows every problem code the gateway has: its
// Problem schema's enum names it and each operation's errors give it its
// status.
func TestTheOpenAPIDocumentKnowsEveryProblemCode(t *testing.T) {
	t.Parallel()
	d, err := apidoc.Base()
	if err != nil {
		t.Fatal(err)
	}
	enum := map[string]bool{}
	for _, v := range d.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum {
		enum[v.(string)] = true
	}
	for _, code := range wire.Codes() {
		if !enum[code] {
			t.Errorf("code %s is not in the Problem schema's enum (gateway/apidoc/openapi.yaml)", code)
		}
		if apidoc.ProblemStatus(code) == 0 {
			t.Errorf("code %s has no status in apidoc", code)
		}
	}
	if len(enum) != len(wire.Codes()) {
		t.Errorf("the Problem schema names %d codes, the gateway has %d", len(enum), len(wire.Codes()))
	}
}
