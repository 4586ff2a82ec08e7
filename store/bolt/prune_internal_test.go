package bolt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"sandgate/store"
)

// The reaper prunes every pass: with nothing past the retention, Prune
// must not commit a write transaction (each one syncs bbolt's freelist,
// whose size grows with the history).
func TestPruneWithNothingDueWritesNothing(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UTC()
	rec := store.Sandbox{ID: "a", Node: "w1", Principal: "agent:p", State: store.StateStarting, CreatedAt: now, ExpiresAt: now.Add(time.Hour), CeilingAt: now.Add(time.Hour)}
	if err := s.Reserve(ctx, rec, func(store.ReserveFacts) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "a", func(r *store.Sandbox) error { r.State, r.EndedAt = store.StateEnded, now; return nil }); err != nil {
		t.Fatal(err)
	}
	st := s.db.Stats()
	before := st.TxStats.GetWrite()
	if n, err := s.Prune(ctx, now.Add(-time.Minute), 10); err != nil || n != 0 {
		t.Fatalf("prune before the record's end: %d %v", n, err)
	}
	st = s.db.Stats()
	if after := st.TxStats.GetWrite(); after != before {
		t.Fatalf("a prune with nothing due wrote %d pages", after-before)
	}
	if n, err := s.Prune(ctx, now.Add(time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("prune after the record's end: %d %v", n, err)
	}
}
