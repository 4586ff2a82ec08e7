package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema: migrations/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded steps in order. Their numbers run 1, 2,
// 3 ... without gaps; a test holds them so.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %04d_%s: expected number %d (no gaps, no repeats)", m.version, m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this build knows: the number of the
// last embedded migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrationLock is the advisory lock key under which replicas migrate one
// at a time ("sandgate" in ASCII, as a 64-bit number).
const migrationLock = 0x73616e6467617465

// migrate brings the database to SchemaVersion and returns its cursor
// key. It holds a session advisory lock on one connection throughout, so
// replicas starting together apply each step once; each step and its
// schema_migrations row commit in one transaction, so a step is applied
// completely or not at all. A database whose recorded version is newer
// than this build's is refused with ErrNewerSchema, untouched.
func migrate(ctx context.Context, pool *pgxpool.Pool) ([]byte, error) {
	steps, err := migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return nil, err
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	}()
	// A database already at this schema is only read, so a gateway can
	// start on a read-only server (a standby) and serve reads.
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return nil, err
		}
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return nil, err
	}
	if want := len(steps); have > want {
		return nil, fmt.Errorf("%w: the database is at schema %d, this build knows %d (upgrade sandgate)", ErrNewerSchema, have, want)
	}
	for _, m := range steps[have:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	var key []byte
	err = conn.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'cursor_key'`).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := conn.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('cursor_key', $1) ON CONFLICT (key) DO NOTHING`, newKey(32)); err != nil {
			return nil, err
		}
		err = conn.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'cursor_key'`).Scan(&key)
	}
	if err != nil {
		return nil, err
	}
	return key, nil
}
