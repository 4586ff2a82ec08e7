package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
	"sandgate/store/orderkey"
)

// TouchInterval is the coarseness of TouchToken: a use is written only when
// the stored LastUsed is older than this, so a busy token does not cost a
// write per request.
const TouchInterval = time.Minute

// PutToken records a new token's metadata: store.ErrInvalid for an empty
// jti, store.ErrExists if the jti is taken (the primary key decides, so two
// gateways can never record one jti twice).
func (s *Store) PutToken(ctx context.Context, t store.Token) error {
	if t.JTI == "" {
		return fmt.Errorf("store: put token: %w", store.Invalid("jti", "empty"))
	}
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("store: put token %s: %w", t.JTI, err)
	}
	err = s.tx(ctx, func(p pgx.Tx) error {
		tag, err := p.Exec(ctx, `INSERT INTO tokens (jti, pos, record) VALUES ($1, $2, $3) ON CONFLICT (jti) DO NOTHING`,
			[]byte(t.JTI), orderkey.At(t.CreatedAt, t.JTI), body)
		if err == nil && tag.RowsAffected() == 0 {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put token %s: %w", t.JTI, err)
	}
	return nil
}

// GetToken returns the token record of jti, or store.ErrNotFound.
func (s *Store) GetToken(ctx context.Context, jti string) (store.Token, error) {
	var t store.Token
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		var err error
		t, err = getToken(ctx, p, jti, false)
		return err
	})
	if err != nil {
		return store.Token{}, fmt.Errorf("store: get token %s: %w", jti, err)
	}
	return t, nil
}

func getToken(ctx context.Context, q querier, jti string, lock bool) (store.Token, error) {
	sql := `SELECT record FROM tokens WHERE jti = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	var (
		body []byte
		t    store.Token
	)
	if err := q.QueryRow(ctx, sql, []byte(jti)).Scan(&body); err != nil {
		return store.Token{}, notFound(err)
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return store.Token{}, fmt.Errorf("decode token: %w", err)
	}
	return t, nil
}

// ListTokens returns every token record ordered by CreatedAt, then JTI; an
// empty, non-nil slice when there are none.
func (s *Store) ListTokens(ctx context.Context) ([]store.Token, error) {
	out := []store.Token{}
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, `SELECT record FROM tokens ORDER BY pos`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				body []byte
				t    store.Token
			)
			if err := rows.Scan(&body); err != nil {
				return err
			}
			if err := json.Unmarshal(body, &t); err != nil {
				return fmt.Errorf("decode token: %w", err)
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken sets RevokedAt to at (now when at is zero). It is
// idempotent: a revoked token keeps its first RevokedAt. store.ErrNotFound
// if absent. Every gateway reads revocations from the same table, so a
// revocation through one is seen by all at their next check.
func (s *Store) RevokeToken(ctx context.Context, jti string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	err := s.modifyToken(ctx, jti, func(t *store.Token) bool {
		if !t.RevokedAt.IsZero() {
			return false
		}
		t.RevokedAt = at
		return true
	})
	if err != nil {
		return fmt.Errorf("store: revoke token %s: %w", jti, err)
	}
	return nil
}

// TouchToken records a use of jti at at (now when zero). It is coarse: it
// writes only when at is more than TouchInterval after the stored
// LastUsed, and checks that with a plain read first, so most calls lock
// nothing. store.ErrNotFound if absent.
func (s *Store) TouchToken(ctx context.Context, jti string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	stale := func(t *store.Token) bool { return at.Sub(t.LastUsed) > TouchInterval }
	t, err := s.GetToken(ctx, jti)
	if err == nil && stale(&t) {
		err = s.modifyToken(ctx, jti, func(t *store.Token) bool {
			if !stale(t) { // another touch got there first
				return false
			}
			t.LastUsed = at
			return true
		})
	}
	if err != nil {
		return fmt.Errorf("store: touch token %s: %w", jti, err)
	}
	return nil
}

// modifyToken applies change to the token's record, its row locked, and
// writes it back when change reports a change.
func (s *Store) modifyToken(ctx context.Context, jti string, change func(*store.Token) bool) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		t, err := getToken(ctx, tx, jti, true)
		if err != nil {
			return err
		}
		if !change(&t) {
			return nil
		}
		body, err := json.Marshal(t)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE tokens SET record = $2 WHERE jti = $1`, []byte(jti), body)
		return err
	})
}
