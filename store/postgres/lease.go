package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
)

var _ store.Leaser = (*Store)(nil)

// AcquireLease takes or renews the named lease for holder; see
// store.Leaser. One statement decides, under the lease row's lock: a free
// or expired lease is taken (epoch + 1), holder's own unexpired lease is
// renewed (same epoch), another's unexpired lease is left alone and
// returned as it stands.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("store: acquire lease: %w", store.Invalid("lease", "a name, a holder and a positive ttl are required"))
	}
	l := store.Lease{Name: name}
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		err := p.QueryRow(ctx, `INSERT INTO leases AS l (name, holder, epoch, expires_at, acquired_at)
			VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3), clock_timestamp())
			ON CONFLICT (name) DO UPDATE SET
				holder      = EXCLUDED.holder,
				epoch       = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.epoch ELSE l.epoch + 1 END,
				acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.acquired_at ELSE clock_timestamp() END,
				expires_at  = EXCLUDED.expires_at
			WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp()
			RETURNING holder, epoch, expires_at`, name, holder, ttl.Seconds()).Scan(&l.Holder, &l.Epoch, &l.Expires)
		if errors.Is(err, pgx.ErrNoRows) { // another holds it
			err = p.QueryRow(ctx, `SELECT holder, epoch, expires_at FROM leases WHERE name = $1`, name).Scan(&l.Holder, &l.Epoch, &l.Expires)
		}
		return err
	})
	if err != nil {
		return store.Lease{}, fmt.Errorf("store: acquire lease %s: %w", name, err)
	}
	return l, nil
}

// ReleaseLease ends holder's lease now; see store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, `UPDATE leases SET expires_at = clock_timestamp() WHERE name = $1 AND holder = $2 AND expires_at > clock_timestamp()`, name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: release lease %s: %w", name, err)
	}
	return nil
}

// LeaseHeld reports whether holder holds the named lease now; see
// store.Leaser.
func (s *Store) LeaseHeld(ctx context.Context, name, holder string) (bool, error) {
	var held bool
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		return p.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND expires_at > clock_timestamp())`,
			name, holder).Scan(&held)
	})
	if err != nil {
		return false, fmt.Errorf("store: read lease %s: %w", name, err)
	}
	return held, nil
}

// checkFence fails with store.ErrFenced unless the lease ctx carries (if
// any) is still held at its epoch. It runs first in a write's
// transaction and keeps the lease row share-locked to the commit, so a
// replica taking the lease over waits for the write, and a write never
// commits after the lease has changed hands.
func checkFence(ctx context.Context, tx pgx.Tx) error {
	l, ok := store.FenceOf(ctx)
	if !ok {
		return nil
	}
	var held bool
	err := tx.QueryRow(ctx, `SELECT true FROM leases
		WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp() FOR SHARE`,
		l.Name, l.Holder, l.Epoch).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w (%s, held by %s at epoch %d)", store.ErrFenced, l.Name, l.Holder, l.Epoch)
	}
	return err
}
