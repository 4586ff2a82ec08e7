package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
	"sandgate/store/orderkey"
)

// stateCodes are the states as the state column holds them. They are part
// of the schema: never renumber them.
var stateCodes = map[store.State]int16{
	store.StateStarting: 1,
	store.StateRunning:  2,
	store.StateFailed:   3,
	store.StateEnded:    4,
}

const codeFailed = 3

// Reserve inserts rec if admit, called inside the transaction with the
// node's and principal's current use (their rows locked) and the node
// record, returns nil; see store.Store. admit's error is returned wrapped
// with %w and nothing is written; a nil admit admits everything. admit
// may run more than once when PostgreSQL aborts the transaction to break
// a deadlock, so it must not have effects of its own. A zero CreatedAt is
// set to now, a zero UpdatedAt to CreatedAt.
func (s *Store) Reserve(ctx context.Context, rec store.Sandbox, admit func(store.ReserveFacts) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, err)
	}
	if err := store.ValidateNew(rec); err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, err)
	}
	rec = cloneSandbox(rec)
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = s.now()
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	args, err := rowArgs(rec)
	if err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)`, []byte(rec.ID)).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return store.ErrExists
		}
		if rec.IdempotencyKey != "" {
			prev, ok, err := idempotent(ctx, tx, rec.IdempotencyKey, rec.CreatedAt.Add(-store.IdempotencyWindow), true)
			if err != nil {
				return err
			}
			if ok {
				return &store.IdempotencyConflictError{ID: prev.ID}
			}
		}
		var facts store.ReserveFacts
		b := &pgx.Batch{}
		b.Queue(lockUse("node_usage", "node"), []byte(rec.Node)).QueryRow(func(r pgx.Row) error {
			return r.Scan(&facts.Node.Sandboxes, &facts.Node.CPUMHz, &facts.Node.MemoryMB)
		})
		b.Queue(lockUse("principal_usage", "principal"), []byte(rec.Principal)).QueryRow(func(r pgx.Row) error {
			return r.Scan(&facts.Principal.Sandboxes, &facts.Principal.CPUMHz, &facts.Principal.MemoryMB)
		})
		b.Queue(`SELECT record FROM nodes WHERE name = $1`, []byte(rec.Node)).QueryRow(func(r pgx.Row) error {
			var raw []byte
			err := r.Scan(&raw)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			var n store.Node
			if err := json.Unmarshal(raw, &n); err != nil {
				return fmt.Errorf("decode node %q: %w", rec.Node, err)
			}
			facts.NodeInfo = &n
			return nil
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if admit != nil {
			if err := admit(facts); err != nil {
				return err
			}
		}
		w := &pgx.Batch{}
		w.Queue(insertSandbox, args...)
		queueUse(w, rec, +1)
		queueCount(w, rec.ID, stateCodes[rec.State], +1)
		return tx.SendBatch(ctx, w).Close()
	})
	if err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, uniqueAsExists(err))
	}
	return nil
}

// lockUse is the statement that locks one use row, creating it at zero
// when absent, and returns it.
func lockUse(table, key string) string {
	return `INSERT INTO ` + table + ` (` + key + `) VALUES ($1)
		ON CONFLICT (` + key + `) DO UPDATE SET ` + key + ` = EXCLUDED.` + key + `
		RETURNING sandboxes, cpu_mhz, memory_mb`
}

// queueUse adds (sign +1) or releases (sign -1) rec's resources on its
// node's and then its principal's use. A release that would go below
// zero can only follow damage to the tables; it clamps at zero rather
// than fail every later end of a sandbox.
func queueUse(b *pgx.Batch, rec store.Sandbox, sign int64) {
	for _, t := range [][2]string{{"node_usage", "node"}, {"principal_usage", "principal"}} {
		key := rec.Node
		if t[1] == "principal" {
			key = rec.Principal
		}
		b.Queue(`INSERT INTO `+t[0]+` (`+t[1]+`, sandboxes, cpu_mhz, memory_mb) VALUES ($1, greatest(0, $2::bigint), greatest(0, $3::bigint), greatest(0, $4::bigint))
			ON CONFLICT (`+t[1]+`) DO UPDATE SET
				sandboxes = greatest(0, `+t[0]+`.sandboxes + $2),
				cpu_mhz   = greatest(0, `+t[0]+`.cpu_mhz + $3),
				memory_mb = greatest(0, `+t[0]+`.memory_mb + $4)`,
			[]byte(key), sign, sign*rec.CPUMHz, sign*rec.MemoryMB)
	}
}

// queueCount moves the count of a state by delta, on the id's shard.
func queueCount(b *pgx.Batch, id string, state int16, delta int64) {
	b.Queue(`INSERT INTO state_counts (state, shard, n) VALUES ($1, $2, greatest(0, $3::bigint))
		ON CONFLICT (state, shard) DO UPDATE SET n = greatest(0, state_counts.n + $3)`,
		state, shardOf(id), delta)
}

// shardOf is the count shard of a record.
func shardOf(id string) int16 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int16(h.Sum32() % countShards) //nolint:gosec // below countShards
}

const insertSandbox = `INSERT INTO sandboxes
	(id, node, principal, state, pos, due, ended, idem, token_jti, token_dig, cpu_mhz, memory_mb, record, spec)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

// rowArgs are the columns of rec, in insertSandbox's order.
func rowArgs(rec store.Sandbox) ([]any, error) {
	spec := rec.Spec
	rec.Spec = nil
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	var due, ended []byte
	if rec.State.Live() {
		due = orderkey.At(orderkey.Earlier(rec.ExpiresAt, rec.CeilingAt), rec.ID)
	} else {
		at := rec.EndedAt
		if at.IsZero() {
			at = rec.UpdatedAt
		}
		ended = orderkey.At(at, rec.ID)
	}
	if len(spec) == 0 {
		spec = nil
	}
	return []any{
		[]byte(rec.ID), []byte(rec.Node), []byte(rec.Principal), stateCodes[rec.State],
		orderkey.At(rec.CreatedAt, rec.ID), due, ended,
		nullable(rec.IdempotencyKey), nullable(rec.TokenJTI), nullable(rec.TokenDigest),
		rec.CPUMHz, rec.MemoryMB, body, spec,
	}, nil
}

// nullable is s as bytea, NULL when empty.
func nullable(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// uniqueAsExists turns a unique violation (a racing insert of the same
// id, or of a session token another record holds) into store.ErrExists.
func uniqueAsExists(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: %s", store.ErrExists, pe.ConstraintName)
	}
	return err
}

// ByIdempotencyKey returns the newest record holding key that was created
// at or after since and did not fail, with its spec, or store.ErrNotFound.
func (s *Store) ByIdempotencyKey(ctx context.Context, key string, since time.Time) (store.Sandbox, error) {
	var rec store.Sandbox
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		found, ok, err := idempotent(ctx, p, key, since, false)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		rec = found
		return nil
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("store: idempotency key: %w", err)
	}
	return rec, nil
}

// querier is what idempotent and the readers need of a pool or a
// transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// idempotent finds the newest record holding key, created at or after
// since, that did not fail (a failed create is not answered again: the
// key creates anew). With lock (inside Reserve's transaction) it first
// takes the key's row lock, so racing repeats of one key on any gateway
// wait for each other and the later one sees the earlier one's record.
func idempotent(ctx context.Context, q querier, key string, since time.Time, lock bool) (store.Sandbox, bool, error) {
	if lock {
		if _, err := q.Exec(ctx, `INSERT INTO idempotency_keys (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, []byte(key)); err != nil {
			return store.Sandbox{}, false, err
		}
		if _, err := q.Exec(ctx, `SELECT 1 FROM idempotency_keys WHERE key = $1 FOR UPDATE`, []byte(key)); err != nil {
			return store.Sandbox{}, false, err
		}
	}
	var body, spec []byte
	err := q.QueryRow(ctx, `SELECT record, spec FROM sandboxes
		WHERE idem = $1 AND pos >= $2 AND state <> $3 ORDER BY pos DESC LIMIT 1`,
		[]byte(key), orderkey.AppendTime(nil, since), int16(codeFailed)).Scan(&body, &spec)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Sandbox{}, false, nil
	}
	if err != nil {
		return store.Sandbox{}, false, err
	}
	rec, err := decode(body, spec)
	return rec, err == nil, err
}

// Get returns the record with its spec, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (store.Sandbox, error) {
	var rec store.Sandbox
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		var body, spec []byte
		if err := p.QueryRow(ctx, `SELECT record, spec FROM sandboxes WHERE id = $1`, []byte(id)).Scan(&body, &spec); err != nil {
			return notFound(err)
		}
		var err error
		rec, err = decode(body, spec)
		return err
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("store: get %s: %w", id, err)
	}
	return rec, nil
}

// Update applies mutate to the current record (spec included), its row
// locked, and stores the result in the same transaction; see
// store.Store. A live-to-terminal change releases the record's budget and
// sets a zero EndedAt to now; UpdatedAt is always set to now. mutate may
// run more than once when PostgreSQL aborts the transaction to break a
// deadlock, so it must not have effects of its own.
func (s *Store) Update(ctx context.Context, id string, mutate func(*store.Sandbox) error) (store.Sandbox, error) {
	var out store.Sandbox
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var body, spec []byte
		if err := tx.QueryRow(ctx, `SELECT record, spec FROM sandboxes WHERE id = $1 FOR UPDATE`, []byte(id)).Scan(&body, &spec); err != nil {
			return notFound(err)
		}
		cur, err := decode(body, spec)
		if err != nil {
			return err
		}
		next := cloneSandbox(cur)
		if mutate != nil {
			if err := mutate(&next); err != nil {
				return err
			}
		}
		if err := store.CheckChange(cur, next); err != nil {
			return err
		}
		now := s.now()
		next.UpdatedAt = now
		b := &pgx.Batch{}
		if cur.State.Live() && !next.State.Live() {
			if next.EndedAt.IsZero() {
				next.EndedAt = now
			}
			queueUse(b, cur, -1)
		}
		args, err := rowArgs(next)
		if err != nil {
			return err
		}
		withSpec := !bytes.Equal(cur.Spec, next.Spec)
		if !withSpec {
			args = args[:13]
		}
		b.Queue(updateSandbox(withSpec), args...)
		if cur.State != next.State {
			from, to := stateCodes[cur.State], stateCodes[next.State]
			deltas := []struct {
				st int16
				d  int64
			}{{from, -1}, {to, +1}}
			if to < from { // the counts are locked in state order
				deltas[0], deltas[1] = deltas[1], deltas[0]
			}
			for _, d := range deltas {
				queueCount(b, id, d.st, d.d)
			}
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		out = cloneSandbox(next)
		return nil
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("store: update %s: %w", id, uniqueAsExists(err))
	}
	return out, nil
}

// updateSandbox rewrites a row from rowArgs' columns; the spec only when
// it changed, so an update of a record does not rewrite its rendered job.
func updateSandbox(withSpec bool) string {
	q := `UPDATE sandboxes SET state = $4, pos = $5, due = $6, ended = $7, idem = $8,
		token_jti = $9, token_dig = $10, record = $13`
	if withSpec {
		q += `, spec = $14`
	}
	return q + ` WHERE id = $1 AND node = $2 AND principal = $3 AND cpu_mhz = $11 AND memory_mb = $12`
}

// NodeUsage returns the live use on node; zero for a node with none.
func (s *Store) NodeUsage(ctx context.Context, node string) (store.Usage, error) {
	var u store.Usage
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		err := p.QueryRow(ctx, `SELECT sandboxes, cpu_mhz, memory_mb FROM node_usage WHERE node = $1`, []byte(node)).
			Scan(&u.Sandboxes, &u.CPUMHz, &u.MemoryMB)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return store.Usage{}, fmt.Errorf("store: node usage %s: %w", node, err)
	}
	return u, nil
}

// decode reads a record column (and its spec).
func decode(body, spec []byte) (store.Sandbox, error) {
	var rec store.Sandbox
	if err := json.Unmarshal(body, &rec); err != nil {
		return store.Sandbox{}, fmt.Errorf("decode record: %w", err)
	}
	if len(spec) > 0 {
		rec.Spec = spec
	}
	return rec, nil
}

// notFound maps "no row" to store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// cloneSandbox returns rec with its own Labels map and Spec bytes.
func cloneSandbox(rec store.Sandbox) store.Sandbox {
	rec.Labels = maps.Clone(rec.Labels)
	rec.Spec = bytes.Clone(rec.Spec)
	return rec
}
