package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTemp(t, bolt.Options{})
	})
}

// openTemp opens a store on a fresh file and closes it at cleanup.
func openTemp(t *testing.T, opts bolt.Options) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// live returns a valid live record.
func live(id string) store.Sandbox {
	return store.Sandbox{
		ID: id, Node: "w1", Principal: "alice", State: store.StateStarting,
		CPUMHz: 500, MemoryMB: 512,
		Labels: map[string]string{"team": "a"}, Spec: []byte(`{}`),
	}
}

func TestDataSurvivesCloseAndReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, id := range []string{"a", "b"} {
		if err := s.Reserve(ctx, live(id), nil); err != nil {
			t.Fatalf("Reserve(%s): %v", id, err)
		}
	}
	if _, err := s.Update(ctx, "b", func(r *store.Sandbox) error { r.State = store.StateEnded; return nil }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.PutNode(ctx, store.Node{Name: "w1", State: "active", MaxSandboxes: 4}); err != nil {
		t.Fatalf("PutNode: %v", err)
	}
	if err := s.PutToken(ctx, store.Token{JTI: "t1", Role: "operator"}); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = s.Close() }()
	recs, err := s.List(ctx, store.Filter{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("List after reopen = %v, %v; want a and b", recs, err)
	}
	if b, err := s.Get(ctx, "b"); err != nil || b.State != store.StateEnded || b.Labels["team"] != "a" {
		t.Fatalf("Get(b) after reopen = %+v, %v", b, err)
	}
	if u, err := s.NodeUsage(ctx, "w1"); err != nil || u != (store.Usage{Sandboxes: 1, CPUMHz: 500, MemoryMB: 512}) {
		t.Fatalf("NodeUsage after reopen = %+v, %v; want a's use only", u, err)
	}
	if n, err := s.GetNode(ctx, "w1"); err != nil || n.MaxSandboxes != 4 {
		t.Fatalf("GetNode after reopen = %+v, %v", n, err)
	}
	if _, err := s.GetToken(ctx, "t1"); err != nil {
		t.Fatalf("GetToken after reopen: %v", err)
	}
}

func TestOpenCreatesPrivateFileAndDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "var", "sandgate")
	path := filepath.Join(dir, "state.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s.Close() }()
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{path, 0o600}, {dir, 0o700}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatalf("Stat(%s): %v", c.path, err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("%s mode = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestSecondOpenFailsWithLockedError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	first, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = first.Close() }()

	timeout := 150 * time.Millisecond
	start := time.Now()
	second, err := bolt.Open(path, bolt.Options{Timeout: timeout})
	elapsed := time.Since(start)
	if err == nil {
		_ = second.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	if !errors.Is(err, bolt.ErrLocked) || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second Open = %v, want ErrLocked saying the file is locked", err)
	}
	// bbolt retries the lock every 50ms and may give up a retry early.
	if elapsed > timeout+2*time.Second {
		t.Errorf("second Open gave up after %s, want about %s", elapsed, timeout)
	}
	if err := first.Ping(context.Background()); err != nil {
		t.Errorf("first store after a refused second Open: %v", err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("schema"), []byte("3"))
	})
	if err != nil {
		t.Fatalf("write schema: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("bbolt Close: %v", err)
	}

	s, err := bolt.Open(path, bolt.Options{})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
	if !errors.Is(err, bolt.ErrNewerSchema) || !strings.Contains(err.Error(), "schema 3") {
		t.Fatalf("Open = %v, want ErrNewerSchema naming schema 3", err)
	}

	// The refused file is left as it was: no buckets added.
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	defer func() { _ = db.Close() }()
	_ = db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("sandboxes")) != nil {
			t.Errorf("refused Open created the sandboxes bucket")
		}
		return nil
	})
}

func TestClockSetsTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	s := openTemp(t, bolt.Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	if err := s.Reserve(ctx, live("a"), nil); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	rec, err := s.Get(ctx, "a")
	if err != nil || !rec.CreatedAt.Equal(now) || !rec.UpdatedAt.Equal(now) {
		t.Fatalf("Get = %+v, %v; want CreatedAt and UpdatedAt %s", rec, err, now)
	}
	now = now.Add(time.Hour)
	rec, err = s.Update(ctx, "a", func(r *store.Sandbox) error { r.State = store.StateEnded; return nil })
	if err != nil || !rec.UpdatedAt.Equal(now) || !rec.EndedAt.Equal(now) || !rec.CreatedAt.Equal(now.Add(-time.Hour)) {
		t.Fatalf("Update = %+v, %v; want UpdatedAt and EndedAt %s", rec, err, now)
	}
}

func TestTouchTokenIsCoarse(t *testing.T) {
	t.Parallel()
	s := openTemp(t, bolt.Options{})
	ctx := context.Background()
	if err := s.PutToken(ctx, store.Token{JTI: "t", Role: "agent"}); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"a first use is recorded", at, at},
		{"a use within the interval is not written", at.Add(bolt.TouchInterval / 2), at},
		{"an earlier use is not written", at.Add(-time.Hour), at},
		{"a use past the interval is written", at.Add(bolt.TouchInterval + time.Second), at.Add(bolt.TouchInterval + time.Second)},
	}
	for _, tc := range cases { // sequential: each case builds on the last
		if err := s.TouchToken(ctx, "t", tc.at); err != nil {
			t.Fatalf("%s: TouchToken: %v", tc.name, err)
		}
		tok, err := s.GetToken(ctx, "t")
		if err != nil || !tok.LastUsed.Equal(tc.want) {
			t.Fatalf("%s: LastUsed = %s, %v; want %s", tc.name, tok.LastUsed, err, tc.want)
		}
	}
	if err := s.TouchToken(ctx, "missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TouchToken(missing) = %v, want ErrNotFound", err)
	}
}
