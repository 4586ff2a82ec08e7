package test

import (
	"context"
	"slices"
	"testing"

	"sandgate/policies"
	"sandgate/store"
)

// The policy judges sandboxes by the store's state names: T3 lets work run
// only on a state listed in sandbox.states.live. A state the store adds, or
// renames, must be placed in the bundle's lists, or this fails.
func TestThePolicysSandboxStatesAreTheStores(t *testing.T) {
	t.Parallel()
	e, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := e.Settings().Sandbox.States
	var live, terminal []string
	for _, st := range store.States() {
		if st.Live() {
			live = append(live, string(st))
		} else {
			terminal = append(terminal, string(st))
		}
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if !slices.Equal(sorted(got.Live), sorted(live)) {
		t.Errorf("sandbox.states.live is %q; the store's live states are %q", got.Live, live)
	}
	if !slices.Equal(sorted(got.Terminal), sorted(terminal)) {
		t.Errorf("sandbox.states.terminal is %q; the store's terminal states are %q", got.Terminal, terminal)
	}
	for _, st := range store.States() {
		if !st.Valid() {
			t.Errorf("store.States lists %q, which the store does not accept", st)
		}
	}
}
