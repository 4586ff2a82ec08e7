package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// TouchInterval is the coarseness of TouchToken: a use is written only when
// the stored LastUsed is older than this, so a busy token does not cost a
// disk write per request.
const TouchInterval = time.Minute

// PutToken records a new token's metadata: store.ErrInvalid for an empty
// jti, store.ErrExists if the jti is taken.
func (s *Store) PutToken(ctx context.Context, t store.Token) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: put token %s: %w", t.JTI, err)
	}
	if t.JTI == "" {
		return fmt.Errorf("store: put token: %w", invalid("jti", "empty"))
	}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTokens)
		if b.Get([]byte(t.JTI)) != nil {
			return store.ErrExists
		}
		return putJSON(b, t.JTI, t)
	})
	if err != nil {
		return fmt.Errorf("store: put token %s: %w", t.JTI, err)
	}
	return nil
}

// GetToken returns the token record of jti, or store.ErrNotFound.
func (s *Store) GetToken(ctx context.Context, jti string) (store.Token, error) {
	var t store.Token
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return getJSON(tx.Bucket(bucketTokens), jti, &t)
	})
	if err != nil {
		return store.Token{}, fmt.Errorf("store: get token %s: %w", jti, err)
	}
	return t, nil
}

// ListTokens returns every token record ordered by CreatedAt, then JTI; an
// empty, non-nil slice when there are none.
func (s *Store) ListTokens(ctx context.Context) ([]store.Token, error) {
	out := []store.Token{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTokens).ForEach(func(k, v []byte) error {
			var t store.Token
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode %q: %w", k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	slices.SortFunc(out, func(a, b store.Token) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.JTI, b.JTI)
	})
	return out, nil
}

// RevokeToken sets RevokedAt to at (now when at is zero). It is
// idempotent: a revoked token keeps its first RevokedAt. store.ErrNotFound
// if absent.
func (s *Store) RevokeToken(ctx context.Context, jti string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTokens)
		var t store.Token
		if err := getJSON(b, jti, &t); err != nil {
			return err
		}
		if !t.RevokedAt.IsZero() {
			return nil
		}
		t.RevokedAt = at
		return putJSON(b, jti, t)
	})
	if err != nil {
		return fmt.Errorf("store: revoke token %s: %w", jti, err)
	}
	return nil
}

// TouchToken records a use of jti at at. It is coarse: it writes only when
// at is more than TouchInterval after the stored LastUsed, and the check
// runs in a read transaction first, so most calls take no write lock.
// A zero at means now. store.ErrNotFound if absent.
func (s *Store) TouchToken(ctx context.Context, jti string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	stale := func(t store.Token) bool { return at.Sub(t.LastUsed) > TouchInterval }
	var needed bool
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var t store.Token
		if err := getJSON(tx.Bucket(bucketTokens), jti, &t); err != nil {
			return err
		}
		needed = stale(t)
		return nil
	})
	if err == nil && needed {
		err = s.update(ctx, func(tx *bbolt.Tx) error {
			b := tx.Bucket(bucketTokens)
			var t store.Token
			if err := getJSON(b, jti, &t); err != nil {
				return err
			}
			if !stale(t) { // another touch got there first
				return nil
			}
			t.LastUsed = at
			return putJSON(b, jti, t)
		})
	}
	if err != nil {
		return fmt.Errorf("store: touch token %s: %w", jti, err)
	}
	return nil
}
