package bolt

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// Due returns copies of the live records whose ExpiresAt or CeilingAt is
// at or before at, earliest first, without their spec; an empty, non-nil
// slice when none is. It walks by_expiry from its start and stops at the
// first key past at, so a pass with nothing due reads one key.
func (s *Store) Due(ctx context.Context, at time.Time) ([]store.Sandbox, error) {
	out := []store.Sandbox{}
	bound := appendTime(nil, at)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketByExpiry).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			id, err := idOf(k)
			if err != nil {
				return err
			}
			if bytes.Compare(k[:timeLen], bound) > 0 {
				return nil
			}
			rec, err := loadIndexed(tx, bucketByExpiry, id)
			if err != nil {
				return err
			}
			if !rec.State.Live() {
				return fmt.Errorf("index %s names %q, which is %s: the file is damaged", bucketByExpiry, id, rec.State)
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: due: %w", err)
	}
	return out, nil
}

// Counts returns the number of stored records in each state, read from
// state_counts (four keys, whatever the history).
func (s *Store) Counts(ctx context.Context) (map[store.State]int64, error) {
	out := make(map[store.State]int64, len(allStates))
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStateCounts)
		for _, st := range allStates {
			out[st] = readCount(b, st)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: counts: %w", err)
	}
	return out, nil
}

// Spec returns a copy of the record's spec, nil if it was stored without
// one; store.ErrNotFound if there is no such record.
func (s *Store) Spec(ctx context.Context, id string) ([]byte, error) {
	var spec []byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketSandboxes).Get([]byte(id)) == nil {
			return store.ErrNotFound
		}
		spec = getSpec(tx, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: spec %s: %w", id, err)
	}
	return spec, nil
}

// Prune deletes up to limit terminal records that ended before
// endedBefore, oldest first, in one write transaction; see store.Store.
// It walks by_ended, which holds only terminal records, so live records
// are never read, let alone deleted. The writer lock is held for the whole
// batch: keep limit to a few thousand and call again while it returns
// limit.
func (s *Store) Prune(ctx context.Context, endedBefore time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("store: prune: %w", invalid("limit", fmt.Sprintf("%d is below 1", limit)))
	}
	bound := appendTime(nil, endedBefore)
	// Nothing past the bound: answer from a read transaction. A write one
	// would commit (and sync bbolt's freelist) on every reaper pass.
	due := false
	if err := s.view(ctx, func(tx *bbolt.Tx) error {
		k, _ := tx.Bucket(bucketByEnded).Cursor().First()
		due = len(k) >= timeLen && bytes.Compare(k[:timeLen], bound) < 0
		return nil
	}); err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	if !due {
		return 0, nil
	}
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		// Collect first: a bbolt cursor must not run across deletes.
		var ids [][]byte
		c := tx.Bucket(bucketByEnded).Cursor()
		for k, _ := c.First(); k != nil && len(ids) < limit; k, _ = c.Next() {
			id, err := idOf(k)
			if err != nil {
				return err
			}
			if bytes.Compare(k[:timeLen], bound) >= 0 {
				break
			}
			ids = append(ids, bytes.Clone(id))
		}
		for _, id := range ids {
			rec, err := loadIndexed(tx, bucketByEnded, id)
			if err != nil {
				return err
			}
			if err := removeTerminal(tx, rec); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	return n, nil
}
