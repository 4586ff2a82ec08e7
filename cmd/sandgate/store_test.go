package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/bolt"
)

// A stopped gateway's bbolt data dir moves into an empty PostgreSQL
// database, which then checks consistent; a second move is refused, and a
// bbolt file a running gateway holds cannot be read.
func TestStoreMigrateMovesABoltDataDirIntoPostgresAndCheckAgrees(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sandgate.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range 6 {
		rec := store.Sandbox{ID: fmt.Sprintf("s%d", i), Node: "w1", Principal: "agent:ci", State: store.StateStarting,
			CPUMHz: 500, MemoryMB: 512, CreatedAt: now, ExpiresAt: now.Add(time.Hour), CeilingAt: now.Add(time.Hour),
			Spec: []byte(`{"Job":{}}`)}
		if err := b.Reserve(ctx, rec, nil); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := b.Update(ctx, rec.ID, func(r *store.Sandbox) error { r.State, r.EndReason = store.StateEnded, "destroyed"; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.PutNode(ctx, store.Node{Name: "w1", Enrollment: "sandbox", State: "active"}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutToken(ctx, store.Token{JTI: "j1", Role: "operator", Subject: "ops", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// While a gateway holds the file, nothing is moved.
	code, _, stderr := runCLI(t, "", "store", "check", "bolt:"+dir)
	if code != exitError || !strings.Contains(stderr, "locked") {
		t.Fatalf("check of a held bbolt file: exit %d, %s", code, stderr)
	}
	_ = b.Close()

	dsn := pgtest.Database(t)
	code, out, stderr := runCLI(t, "", "store", "migrate", "--from", "bolt:"+dir, "--to", "postgres:"+dsn)
	if code != exitOK || !strings.Contains(out, "moved 6 records (starting 0, running 3, failed 0, ended 3), 1 nodes and 1 tokens") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(out, "sandgate_test_") == false {
		t.Fatalf("migrate does not name the target database:\n%s", out)
	}
	code, out, stderr = runCLI(t, "", "store", "check", "-o", "json", "postgres:"+dsn)
	var got struct {
		Check struct {
			Schema   int              `json:"schema"`
			States   map[string]int64 `json:"states"`
			Problems []string         `json:"problems"`
		} `json:"check"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got.Check.Schema < 1 || got.Check.States["running"] != 3 || len(got.Check.Problems) != 0 {
		t.Fatalf("check: exit %d %+v\n%s%s", code, got, out, stderr)
	}
	code, _, stderr = runCLI(t, "", "store", "migrate", "--from", "bolt:"+dir, "--to", dsn)
	if code != exitError || !strings.Contains(stderr, "not empty") {
		t.Fatalf("a second migrate: exit %d, %s", code, stderr)
	}
	for _, tc := range []struct{ args, want string }{
		{"store check sqlite:x", `unknown store "sqlite"`},
		{"store check bolt:" + filepath.Join(dir, "nothing-here"), "no such file"},
		{"store migrate --from bolt:" + dir, `"to" not set`},
	} {
		code, _, stderr := runCLI(t, "", strings.Fields(tc.args)...)
		if code != exitError || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}
