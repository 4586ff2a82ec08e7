package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// SharedDSN returns the shared test server's DSN, or ends the test: a skip
// naming the variable, or a failure under SANDGATE_PG=require.
func SharedDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	if os.Getenv(EnvRequire) == "require" {
		t.Fatalf("%s is unset and %s=require: the PostgreSQL tests must run (make test starts a server through test/pgrun)", EnvDSN, EnvRequire)
	}
	t.Skipf("PostgreSQL: %s is unset (make test starts a server and sets it)", EnvDSN)
	return ""
}

// Database creates a new, empty database on the shared test server and
// returns its DSN; the database is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	return databaseOn(t, SharedDSN(t))
}

// StartServer starts a private server for t (see Start) and stops and
// removes it when t ends. It needs what the shared server needs, so it
// skips or fails like SharedDSN when that is absent.
func StartServer(t testing.TB) *Server {
	t.Helper()
	SharedDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Logf("pgtest: closing the private server: %v", err)
		}
	})
	return s
}

// NewDatabase creates a new, empty database on s and returns its DSN; it
// is dropped when t ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	return databaseOn(t, s.DSN(""))
}

func databaseOn(t testing.TB, serverDSN string) string {
	t.Helper()
	u, err := url.Parse(serverDSN)
	if err != nil || u.Scheme == "" {
		t.Fatalf("pgtest: %s must be a postgres:// URL, not %q", EnvDSN, redact(serverDSN))
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "sandgate_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", redact(serverDSN), err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverDSN)
		if err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// redact drops a password from dsn for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}
