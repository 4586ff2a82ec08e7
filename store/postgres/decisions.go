package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
)

var _ store.DecisionLog = (*Store)(nil)

// AppendDecisions stores ds in one transaction, sent as one batch (one
// round trip); see store.DecisionLog. A decision id already stored is
// skipped.
func (s *Store) AppendDecisions(ctx context.Context, ds []store.Decision) error {
	if len(ds) == 0 {
		return nil
	}
	for _, d := range ds {
		if d.ID == "" || d.Time.IsZero() || len(d.Line) == 0 {
			return fmt.Errorf("store: append decisions: %w", store.Invalid("decision", "an id, a time and the line are required"))
		}
	}
	err := s.logTx(ctx, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, d := range ds {
			rules := make([][]byte, len(d.Rules))
			for i, r := range d.Rules {
				rules[i] = []byte(r)
			}
			b.Queue(`INSERT INTO decisions (t, id, allow, principal, entrypoint, rules, line)
				VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
				d.Time.UnixNano(), []byte(d.ID), d.Allow, []byte(d.Principal), []byte(d.Entrypoint), rules, d.Line)
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("store: append %d decisions: %w", len(ds), err)
	}
	return nil
}

// Decisions returns the decisions q selects; see store.DecisionLog. The
// primary key (t, id) serves the order and the cursor in either
// direction; a principal's decisions are read from its own index, the
// refusals from a partial index of their own, a rule's through the GIN
// index of rules.
func (s *Store) Decisions(ctx context.Context, q store.DecisionQuery) ([]store.Decision, error) {
	if q.Limit < 1 || q.Limit > store.MaxDecisionQuery {
		return nil, fmt.Errorf("store: decisions: %w", store.Invalid("limit", fmt.Sprintf("%d is not in [1, %d]", q.Limit, store.MaxDecisionQuery)))
	}
	sql, args := decisionsSQL(q)
	out := []store.Decision{}
	err := s.withLog(ctx, func(p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d                         store.Decision
				t                         int64
				id, principal, entrypoint []byte
				rules                     [][]byte
			)
			if err := rows.Scan(&t, &id, &d.Allow, &principal, &entrypoint, &rules, &d.Line); err != nil {
				return err
			}
			d.Time, d.ID, d.Principal, d.Entrypoint = time.Unix(0, t).UTC(), string(id), string(principal), string(entrypoint)
			for _, r := range rules {
				d.Rules = append(d.Rules, string(r))
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: decisions: %w", err)
	}
	return out, nil
}

// decisionsSQL is the statement and arguments of one Decisions call.
func decisionsSQL(q store.DecisionQuery) (string, []any) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !q.Since.IsZero() {
		where = append(where, "t >= "+arg(q.Since.UnixNano()))
	}
	if !q.Until.IsZero() {
		where = append(where, "t < "+arg(q.Until.UnixNano()))
	}
	if q.Allow != nil {
		// Written as the partial index's predicate, so a query for the
		// refusals walks that index.
		if *q.Allow {
			where = append(where, "allow")
		} else {
			where = append(where, "NOT allow")
		}
	}
	if q.Principal != "" {
		where = append(where, "principal = "+arg([]byte(q.Principal)))
	}
	if q.Entrypoint != "" {
		where = append(where, "entrypoint = "+arg([]byte(q.Entrypoint)))
	}
	if q.Rule != "" {
		where = append(where, "rules @> ARRAY["+arg([]byte(q.Rule))+"::bytea]")
	}
	order, past := "DESC", "<"
	if q.Oldest {
		order, past = "ASC", ">"
	}
	if q.After.ID != "" {
		where = append(where, "(t, id) "+past+" ("+arg(q.After.Time.UnixNano())+", "+arg([]byte(q.After.ID))+")")
	}
	sql := "SELECT t, id, allow, principal, entrypoint, rules, line FROM decisions"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY t " + order + ", id " + order + " LIMIT " + arg(q.Limit)
	return sql, args
}

// PruneDecisions deletes the oldest decisions taken before before, at
// most limit of them; see store.DecisionLog.
func (s *Store) PruneDecisions(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("store: prune decisions: %w", store.Invalid("limit", "must be at least 1"))
	}
	var n int64
	err := s.logTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM decisions WHERE (t, id) IN
			(SELECT t, id FROM decisions WHERE t < $1 ORDER BY t, id LIMIT $2)`, before.UnixNano(), limit)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune decisions: %w", err)
	}
	return int(n), nil
}
