package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"sandgate/internal/pgtest"
	"sandgate/store/postgres"
)

func TestMigrationsApplyOnceWhenReplicasStartTogether(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(ctx, dsn, postgres.Options{})
			if err == nil {
				_ = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	conn := connect(t, dsn)
	var n, max int
	if err := conn.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion() || max != postgres.SchemaVersion() {
		t.Fatalf("schema_migrations holds %d rows up to %d; want each of 1..%d once", n, max, postgres.SchemaVersion())
	}
	// Opening again applies nothing and keeps the cursor key.
	var key1, key2 []byte
	_ = conn.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'cursor_key'`).Scan(&key1)
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_ = conn.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'cursor_key'`).Scan(&key2)
	if len(key1) != 32 || string(key1) != string(key2) {
		t.Fatalf("cursor key changed on a second open (%x, %x)", key1, key2)
	}
}

func TestOpenRefusesANewerSchemaUntouched(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	conn := connect(t, dsn)
	newer := postgres.SchemaVersion() + 1
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_the_future')`, newer); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, dsn, postgres.Options{})
	if !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Open on a schema %d database: %v, want ErrNewerSchema", newer, err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != newer {
		t.Fatalf("schema_migrations has %d rows (%v), want %d untouched", n, err, newer)
	}
}

func TestMigrationFilesAreNumberedWithoutGaps(t *testing.T) {
	if v := postgres.SchemaVersion(); v < 1 {
		t.Fatalf("SchemaVersion() = %d: the embedded migrations are missing or misnumbered", v)
	}
}

func TestABadDSNIsRefusedWithoutEchoingIt(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://user:s3cret@[::1:5432/db", postgres.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open with a broken DSN: %v", err)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
