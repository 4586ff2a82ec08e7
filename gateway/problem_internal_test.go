package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sandgate/gateway/apidoc"
	"sandgate/gateway/wire"
	"sandgate/store"
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

// decide's errors are plain values mapped at the edge: each kind is a 503
// with its own detail, and only an undecided one (whose line was written)
// names its decision.
func TestDecisionErrorsAreAnsweredAtTheEdge(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	for _, tc := range []struct {
		kind   error
		detail string
		id     string
	}{
		{ErrUndecided, "the policy could not decide", "d-1"},
		{ErrDecisionLog, "the decision log could not be written", ""},
	} {
		err := fmt.Errorf("wrapped: %w", &DecisionError{Kind: tc.kind, Cause: cause, DecisionID: "d-1"})
		if !errors.Is(err, tc.kind) || !errors.Is(err, cause) {
			t.Fatalf("%v: errors.Is does not see the kind and the cause", err)
		}
		p := fromError(err)
		if p.Status != http.StatusServiceUnavailable || p.Code != wire.CodeUnavailable || p.RetryAfter == 0 {
			t.Errorf("%v: answered %d %s retry %v", tc.kind, p.Status, p.Code, p.RetryAfter)
		}
		if !strings.HasPrefix(p.Detail, tc.detail) || p.DecisionID != tc.id {
			t.Errorf("%v: detail %q decision %q, want %q… and %q", tc.kind, p.Detail, p.DecisionID, tc.detail, tc.id)
		}
	}
}

// A database that cannot serve is a 503 to retry, never a 500: the store
// wraps every such cause in store.ErrUnavailable.
func TestAnUnavailableStoreIsA503ToRetry(t *testing.T) {
	t.Parallel()
	cause := fmt.Errorf("store: reserve x: %w: %w", store.ErrUnavailable, errors.New("dial tcp 10.0.0.7:5432: connect: connection refused"))
	p := fromError(cause)
	if p.Status != http.StatusServiceUnavailable || p.Code != wire.CodeUnavailable || p.RetryAfter == 0 {
		t.Fatalf("answered %d %s retry %v", p.Status, p.Code, p.RetryAfter)
	}
	if strings.Contains(p.Detail, "10.0.0.7") || !strings.Contains(p.Detail, "database is unavailable") {
		t.Fatalf("detail %q: want a plain statement without the database's address", p.Detail)
	}
}
