package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
	"sandgate/store/orderkey"
)

// Due returns the live records whose ExpiresAt or CeilingAt is at or
// before at, earliest first, without their spec; an empty, non-nil slice
// when none is. The partial index on due (live records only) serves it,
// so a pass with nothing due reads one index entry.
func (s *Store) Due(ctx context.Context, at time.Time) ([]store.Sandbox, error) {
	// A due key is an instant and then an id; ids are UTF-8, which never
	// holds the byte 0xff, so every key of the instant at sorts below
	// at's encoding followed by 0xff.
	bound := append(orderkey.AppendTime(nil, at), 0xff)
	out := []store.Sandbox{}
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, `SELECT record FROM sandboxes WHERE due IS NOT NULL AND due < $1 ORDER BY due`, bound)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var body []byte
			if err := rows.Scan(&body); err != nil {
				return err
			}
			rec, err := decode(body, nil)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: due: %w", err)
	}
	return out, nil
}

// Counts returns the number of stored records in each state, summed over
// the count shards (at most four times countShards rows, whatever the
// history).
func (s *Store) Counts(ctx context.Context) (map[store.State]int64, error) {
	out := make(map[store.State]int64, 4)
	for _, st := range store.States() {
		out[st] = 0
	}
	byCode := map[int16]store.State{}
	for st, c := range stateCodes {
		byCode[c] = st
	}
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, `SELECT state, sum(n)::bigint FROM state_counts GROUP BY state`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				code int16
				n    int64
			)
			if err := rows.Scan(&code, &n); err != nil {
				return err
			}
			if st, ok := byCode[code]; ok {
				out[st] = n
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: counts: %w", err)
	}
	return out, nil
}

// Spec returns the record's spec, nil if it was stored without one;
// store.ErrNotFound if there is no such record.
func (s *Store) Spec(ctx context.Context, id string) ([]byte, error) {
	var spec []byte
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		return notFound(p.QueryRow(ctx, `SELECT spec FROM sandboxes WHERE id = $1`, []byte(id)).Scan(&spec))
	})
	if err != nil {
		return nil, fmt.Errorf("store: spec %s: %w", id, err)
	}
	if len(spec) == 0 {
		spec = nil
	}
	return spec, nil
}

// Prune deletes up to limit terminal records that ended before
// endedBefore, oldest first, in one transaction; see store.Store. The
// partial index on ended (terminal records only) serves it, so live
// records are never read, and a pass with nothing to prune reads one index
// entry and writes nothing.
func (s *Store) Prune(ctx context.Context, endedBefore time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("store: prune: %w", store.Invalid("limit", fmt.Sprintf("%d is below 1", limit)))
	}
	bound := orderkey.AppendTime(nil, endedBefore)
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `DELETE FROM sandboxes WHERE id IN (
				SELECT id FROM sandboxes WHERE ended IS NOT NULL AND ended < $1 ORDER BY ended LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING id, state`, bound, limit)
		if err != nil {
			return err
		}
		type gone struct {
			id    string
			state int16
		}
		var deleted []gone
		for rows.Next() {
			var (
				id    []byte
				state int16
			)
			if err := rows.Scan(&id, &state); err != nil {
				rows.Close()
				return err
			}
			deleted = append(deleted, gone{string(id), state})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(deleted) == 0 {
			return nil
		}
		// One decrement per (state, shard), taken in state order.
		type slot struct{ state, shard int16 }
		dec := map[slot]int64{}
		for _, d := range deleted {
			dec[slot{d.state, shardOf(d.id)}]++
		}
		b := &pgx.Batch{}
		for st := int16(1); st <= 4; st++ {
			for sh := int16(0); sh < countShards; sh++ {
				if k := dec[slot{st, sh}]; k > 0 {
					b.Queue(`UPDATE state_counts SET n = greatest(0, n - $3) WHERE state = $1 AND shard = $2`, st, sh, k)
				}
			}
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		n = len(deleted)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	return n, nil
}
