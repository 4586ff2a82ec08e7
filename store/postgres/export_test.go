package postgres

import (
	"context"

	"sandgate/store"
)

// LoadForBenchmark stores n records made by gen, in any state, batch to a
// transaction, through Import (a COPY and the counters), then refreshes
// the planner's statistics. It lets a benchmark build a long history in
// seconds.
func (s *Store) LoadForBenchmark(ctx context.Context, n, batch int, gen func(i int) store.Sandbox) error {
	for start := 0; start < n; start += batch {
		recs := make([]store.Sandbox, 0, batch)
		for i := start; i < min(start+batch, n); i++ {
			recs = append(recs, gen(i))
		}
		if err := s.Import(ctx, recs); err != nil {
			return err
		}
	}
	_, err := s.pool.Exec(ctx, `ANALYZE`)
	return err
}

// QueryRowForBenchmark scans one row of sql into dst.
func (s *Store) QueryRowForBenchmark(ctx context.Context, sql string, dst ...any) error {
	return s.pool.QueryRow(ctx, sql).Scan(dst...)
}
