package postgres_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/postgres"
)

// A database that cannot serve makes every call fail with
// store.ErrUnavailable within the configured bounds, never a hang, and
// the store serves again once the database does.

func TestAnUnreachableDatabaseIsUnavailableNotAHang(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	ctx := context.Background()
	_, err = postgres.Open(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable", postgres.Options{ConnectTimeout: time.Second})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed port: %v, want store.ErrUnavailable", err)
	}
}

func TestAStoppedDatabaseIsUnavailableThenServesAgain(t *testing.T) {
	srv := pgtest.StartServer(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{ConnectTimeout: time.Second, StatementTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rec := store.Sandbox{ID: "a", Node: "w1", Principal: "agent:a", State: store.StateStarting,
		CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour), CeilingAt: time.Now().Add(time.Hour)}
	if err := s.Reserve(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Reserve": func() error {
			r := rec
			r.ID = "b"
			return s.Reserve(ctx, r, nil)
		},
		"Get":   func() error { _, err := s.Get(ctx, "a"); return err },
		"Ping":  func() error { return s.Ping(ctx) },
		"Due":   func() error { _, err := s.Due(ctx, time.Now()); return err },
		"Prune": func() error { _, err := s.Prune(ctx, time.Now(), 10); return err },
	} {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s while the database is down: %v, want store.ErrUnavailable", name, err)
		}
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool reconnects on its own; the first calls after a restart may
	// still meet a connection the server closed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Get(ctx, "a")
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Get after the restart: %v", err)
		}
	}
	if n, err := s.NodeUsage(ctx, "w1"); err != nil || n.Sandboxes != 1 {
		t.Fatalf("node use after the restart: %+v, %v", n, err)
	}
}

func TestAReadOnlyDatabaseServesReadsAndRefusesWritesAsUnavailable(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := store.Sandbox{ID: "a", Node: "w1", Principal: "agent:a", State: store.StateStarting,
		CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour), CeilingAt: time.Now().Add(time.Hour)}
	if err := s.Reserve(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	conn := connect(t, dsn)
	var name string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	// New sessions are read-only from here on, as on a standby.
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+name+` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	s, err = postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatalf("Open on a read-only database at this schema: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Get(ctx, "a"); err != nil {
		t.Fatalf("Get on a read-only database: %v", err)
	}
	rec.ID = "b"
	if err := s.Reserve(ctx, rec, nil); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Reserve on a read-only database: %v, want store.ErrUnavailable", err)
	}
	if _, err := s.Update(ctx, "a", func(r *store.Sandbox) error { r.State = store.StateRunning; return nil }); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Update on a read-only database: %v, want store.ErrUnavailable", err)
	}
}

func TestALockedRowIsUnavailableAfterTheStatementTimeout(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	conn := connect(t, dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE node_usage IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	rec := store.Sandbox{ID: "a", Node: "w1", Principal: "agent:a", State: store.StateStarting,
		CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour), CeilingAt: time.Now().Add(time.Hour)}
	err = s.Reserve(ctx, rec, nil)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Reserve behind a held lock: %v, want store.ErrUnavailable", err)
	}
	_ = tx.Rollback(ctx)
	if _, err := s.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the timed-out Reserve left a record: %v", err)
	}
}
