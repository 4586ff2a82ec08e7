package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"sandgate/store"
)

// LoadForBenchmark stores n records made by gen, in any state, batch to a
// COPY, with the counts and use Reserve and Update would leave, without
// validation or admit; then it refreshes the planner's statistics. It
// lets a benchmark build a long history in seconds.
func (s *Store) LoadForBenchmark(ctx context.Context, n, batch int, gen func(i int) store.Sandbox) error {
	columns := []string{"id", "node", "principal", "state", "pos", "due", "ended", "idem", "token_jti", "token_dig",
		"cpu_mhz", "memory_mb", "record", "spec"}
	counts := map[[2]int16]int64{}
	nodes, principals := map[string]store.Usage{}, map[string]store.Usage{}
	for start := 0; start < n; start += batch {
		rows := make([][]any, 0, batch)
		for i := start; i < min(start+batch, n); i++ {
			rec := gen(i)
			args, err := rowArgs(rec)
			if err != nil {
				return err
			}
			rows = append(rows, args)
			counts[[2]int16{stateCodes[rec.State], shardOf(rec.ID)}]++
			if rec.State.Live() {
				for m, k := range map[*map[string]store.Usage]string{&nodes: rec.Node, &principals: rec.Principal} {
					u := (*m)[k]
					u.Sandboxes++
					u.CPUMHz += rec.CPUMHz
					u.MemoryMB += rec.MemoryMB
					(*m)[k] = u
				}
			}
		}
		if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"sandboxes"}, columns, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
	}
	b := &pgx.Batch{}
	for k, c := range counts {
		b.Queue(`INSERT INTO state_counts (state, shard, n) VALUES ($1, $2, $3)
			ON CONFLICT (state, shard) DO UPDATE SET n = state_counts.n + EXCLUDED.n`, k[0], k[1], c)
	}
	for table, m := range map[string]map[string]store.Usage{"node_usage": nodes, "principal_usage": principals} {
		key := map[string]string{"node_usage": "node", "principal_usage": "principal"}[table]
		for name, u := range m {
			b.Queue(`INSERT INTO `+table+` (`+key+`, sandboxes, cpu_mhz, memory_mb) VALUES ($1, $2, $3, $4)`,
				[]byte(name), u.Sandboxes, u.CPUMHz, u.MemoryMB)
		}
	}
	b.Queue(`ANALYZE`)
	return s.pool.SendBatch(ctx, b).Close()
}

// QueryRowForBenchmark scans one row of sql into dst.
func (s *Store) QueryRowForBenchmark(ctx context.Context, sql string, dst ...any) error {
	return s.pool.QueryRow(ctx, sql).Scan(dst...)
}
