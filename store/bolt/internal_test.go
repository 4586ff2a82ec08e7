package bolt

import (
	"context"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// TestReleaseClampsAtZero damages the stored use so that ending a record
// would drive it negative, as only corruption could, and checks that the
// end still succeeds and the use stops at zero rather than going below.
func TestReleaseClampsAtZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s.Close() }()
	rec := store.Sandbox{ID: "a", Node: "w1", Principal: "alice", State: store.StateRunning, CPUMHz: 500, MemoryMB: 512}
	if err := s.Reserve(ctx, rec, nil); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	damaged := store.Usage{Sandboxes: 1, CPUMHz: 100, MemoryMB: 100}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		if err := putJSON(tx.Bucket(bucketNodeUsage), "w1", damaged); err != nil {
			return err
		}
		return tx.Bucket(bucketPrincipalUsage).Delete([]byte("alice"))
	})
	if err != nil {
		t.Fatalf("damage: %v", err)
	}
	if _, err := s.Update(ctx, "a", func(r *store.Sandbox) error { r.State = store.StateEnded; return nil }); err != nil {
		t.Fatalf("Update(ended) on damaged use: %v", err)
	}
	if u, err := s.NodeUsage(ctx, "w1"); err != nil || u != (store.Usage{}) {
		t.Fatalf("NodeUsage = %+v, %v; want zero", u, err)
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketNodeUsage, bucketPrincipalUsage} {
			if n := tx.Bucket(b).Stats().KeyN; n != 0 {
				t.Errorf("%s holds %d keys, want none once use is zero", b, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
}

func TestValidateNewNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		rec   store.Sandbox
		field string
	}{
		{"empty id", store.Sandbox{}, "id"},
		{"ended", store.Sandbox{ID: "a", State: store.StateEnded}, "state"},
		{"no node", store.Sandbox{ID: "a", State: store.StateRunning}, "node"},
		{"no principal", store.Sandbox{ID: "a", State: store.StateRunning, Node: "w1"}, "principal"},
		{"negative cpu", store.Sandbox{ID: "a", State: store.StateRunning, Node: "w1", Principal: "p", CPUMHz: -1}, "cpu_mhz"},
		{"negative memory", store.Sandbox{ID: "a", State: store.StateRunning, Node: "w1", Principal: "p", MemoryMB: -1}, "memory_mb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := validateNew(tc.rec)
			want := "store: invalid record: " + tc.field + ": "
			if err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Fatalf("validateNew = %v, want prefix %q", err, want)
			}
		})
	}
}
