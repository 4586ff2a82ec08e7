package bolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/storetest"
)

// A store opened with NoSync keeps the whole contract; it only skips the
// flush after each commit.
func TestNoSyncStorePassesConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTemp(t, bolt.Options{NoSync: true})
	})
}

// What a NoSync store wrote is read back after a clean close, by a store
// opened without it (how the gateway benchmarks load a history).
func TestNoSyncWritesSurviveCloseAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open(NoSync): %v", err)
	}
	if err := s.Reserve(ctx, live("a"), nil); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if _, err := s.Update(ctx, "a", func(r *store.Sandbox) error { r.State = store.StateEnded; return nil }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = s.Close() }()
	if r, err := s.Get(ctx, "a"); err != nil || r.State != store.StateEnded || string(r.Spec) != "{}" {
		t.Fatalf("Get(a) after reopen = %+v, %v; want the ended record with its spec", r, err)
	}
	if c, err := s.Counts(ctx); err != nil || c[store.StateEnded] != 1 || c[store.StateStarting] != 0 {
		t.Fatalf("Counts after reopen = %v, %v; want one ended", c, err)
	}
}
