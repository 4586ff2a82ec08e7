package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
)

var _ store.Importer = (*Store)(nil)

// importColumns are insertSandbox's columns, for COPY.
var importColumns = []string{"id", "node", "principal", "state", "pos", "due", "ended", "idem", "token_jti", "token_dig",
	"cpu_mhz", "memory_mb", "record", "spec"}

// Import stores recs exactly as given, in any state, with the counts and
// the use that Reserve and Update would have left, in one transaction (a
// COPY, then the counters); see store.Importer. A taken id, session token
// or position is store.ErrExists and nothing is written.
func (s *Store) Import(ctx context.Context, recs []store.Sandbox) error {
	rows := make([][]any, 0, len(recs))
	counts := map[[2]int16]int64{}
	use := map[[2]string]store.Usage{} // {"node"|"principal", name}
	for _, rec := range recs {
		if err := store.ValidateImport(rec); err != nil {
			return fmt.Errorf("store: import %s: %w", rec.ID, err)
		}
		args, err := rowArgs(rec)
		if err != nil {
			return fmt.Errorf("store: import %s: %w", rec.ID, err)
		}
		rows = append(rows, args)
		counts[[2]int16{stateCodes[rec.State], shardOf(rec.ID)}]++
		if rec.State.Live() {
			for _, k := range [][2]string{{"node", rec.Node}, {"principal", rec.Principal}} {
				u := use[k]
				u.Sandboxes++
				u.CPUMHz += rec.CPUMHz
				u.MemoryMB += rec.MemoryMB
				use[k] = u
			}
		}
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sandboxes"}, importColumns, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for k, c := range counts {
			b.Queue(`INSERT INTO state_counts (state, shard, n) VALUES ($1, $2, $3)
				ON CONFLICT (state, shard) DO UPDATE SET n = state_counts.n + EXCLUDED.n`, k[0], k[1], c)
		}
		for k, u := range use {
			table := k[0] + "_usage"
			b.Queue(`INSERT INTO `+table+` (`+k[0]+`, sandboxes, cpu_mhz, memory_mb) VALUES ($1, $2, $3, $4)
				ON CONFLICT (`+k[0]+`) DO UPDATE SET sandboxes = `+table+`.sandboxes + EXCLUDED.sandboxes,
					cpu_mhz = `+table+`.cpu_mhz + EXCLUDED.cpu_mhz, memory_mb = `+table+`.memory_mb + EXCLUDED.memory_mb`,
				[]byte(k[1]), u.Sandboxes, u.CPUMHz, u.MemoryMB)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("store: import: %w", uniqueAsExists(err))
	}
	return nil
}

// SchemaVersions reports the database's schema version and the newest
// this build knows (equal once Open has run).
func (s *Store) SchemaVersions(ctx context.Context) (have, known int, err error) {
	err = s.with(ctx, func(p *pgxpool.Pool) error {
		return p.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have)
	})
	return have, SchemaVersion(), err
}
