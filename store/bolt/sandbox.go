package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// Reserve inserts rec if admit, called inside the write transaction with
// the node's and principal's current use and the node record, returns nil.
// admit's error is returned wrapped with %w and nothing is written; a nil
// admit admits everything. rec must have an id, a node, a principal, a live
// state and non-negative resources (store.ErrInvalid); store.ErrExists if
// the id is taken. A zero CreatedAt is set to now, a zero UpdatedAt to
// CreatedAt. admit must not call the Store.
func (s *Store) Reserve(ctx context.Context, rec store.Sandbox, admit func(store.ReserveFacts) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, err)
	}
	if err := validateNew(rec); err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, err)
	}
	rec = cloneSandbox(rec)
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = s.now()
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		sandboxes := tx.Bucket(bucketSandboxes)
		if sandboxes.Get([]byte(rec.ID)) != nil {
			return store.ErrExists
		}
		if rec.IdempotencyKey != "" {
			prev, ok, err := idempotent(tx, rec.IdempotencyKey, rec.CreatedAt.Add(-store.IdempotencyWindow))
			if err != nil {
				return err
			}
			if ok {
				return &store.IdempotencyConflictError{ID: prev.ID}
			}
		}
		nodeUse, err := getUsage(tx.Bucket(bucketNodeUsage), rec.Node)
		if err != nil {
			return err
		}
		principalUse, err := getUsage(tx.Bucket(bucketPrincipalUsage), rec.Principal)
		if err != nil {
			return err
		}
		info, err := getNodeRecord(tx, rec.Node)
		if err != nil {
			return err
		}
		if admit != nil {
			facts := store.ReserveFacts{Node: nodeUse, Principal: principalUse, NodeInfo: info}
			if err := admit(facts); err != nil {
				return err
			}
		}
		if err := putRecord(tx, rec); err != nil {
			return err
		}
		if err := putSpec(tx, rec.ID, rec.Spec); err != nil {
			return err
		}
		return insertDerived(tx, rec)
	})
	if err != nil {
		return fmt.Errorf("store: reserve %s: %w", rec.ID, err)
	}
	return nil
}

// ByIdempotencyKey returns the newest record holding key that was created
// at or after since and did not fail, with its spec, or store.ErrNotFound.
func (s *Store) ByIdempotencyKey(ctx context.Context, key string, since time.Time) (store.Sandbox, error) {
	var rec store.Sandbox
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		found, ok, err := idempotent(tx, key, since)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		rec = found
		rec.Spec = getSpec(tx, rec.ID)
		return nil
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("store: idempotency key: %w", err)
	}
	return rec, nil
}

// idempotent finds the newest record holding key, created at or after
// since, that did not fail (a failed create is not answered again: the
// key creates anew). Entries are checked against their record, so an
// entry a record no longer backs is passed over.
func idempotent(tx *bbolt.Tx, key string, since time.Time) (store.Sandbox, bool, error) {
	prefix := appendSized(nil, key)
	var (
		found store.Sandbox
		ok    bool
	)
	c := tx.Bucket(bucketByIdempotency).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) <= len(prefix)+timeLen {
			continue
		}
		rec, err := loadRecord(tx, k[len(prefix)+timeLen:])
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return store.Sandbox{}, false, err
		}
		if rec.IdempotencyKey != key || rec.CreatedAt.Before(since) || rec.State == store.StateFailed {
			continue
		}
		found, ok = rec, true // ascending by creation: the last is the newest
	}
	return found, ok, nil
}

// Get returns a copy of the record with its spec, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (store.Sandbox, error) {
	var rec store.Sandbox
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		if rec, err = loadRecord(tx, []byte(id)); err != nil {
			return err
		}
		rec.Spec = getSpec(tx, id)
		return nil
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("store: get %s: %w", id, err)
	}
	return rec, nil
}

// Update applies mutate to a copy of the record (spec included) in one
// write transaction, stores and returns the result, moving its index
// entries and state count with it. mutate may not change ID, Node,
// Principal, CPUMHz or MemoryMB, set an unknown state, or make a terminal
// record live (store.ErrInvalid; nothing written). A live-to-terminal
// change releases the record's budget in the same transaction and sets a
// zero EndedAt to now; a terminal-to-terminal change (failed to ended, a
// new EndReason) is stored and leaves budget alone, so a record is released
// exactly once. UpdatedAt is always set to now. An error from mutate aborts
// and is returned wrapped with %w; store.ErrNotFound if absent. mutate must
// not call the Store.
func (s *Store) Update(ctx context.Context, id string, mutate func(*store.Sandbox) error) (store.Sandbox, error) {
	var out store.Sandbox
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		cur, err := loadRecord(tx, []byte(id))
		if err != nil {
			return err
		}
		cur.Spec = getSpec(tx, id)
		next := cloneSandbox(cur)
		if mutate != nil {
			if err := mutate(&next); err != nil {
				return err
			}
		}
		if err := checkChange(cur, next); err != nil {
			return err
		}
		now := s.now()
		next.UpdatedAt = now
		if cur.State.Live() && !next.State.Live() {
			if next.EndedAt.IsZero() {
				next.EndedAt = now
			}
			if err := holdBudget(tx, cur, -1); err != nil {
				return err
			}
		}
		if err := putRecord(tx, next); err != nil {
			return err
		}
		if !bytes.Equal(cur.Spec, next.Spec) {
			if err := putSpec(tx, id, next.Spec); err != nil {
				return err
			}
		}
		if err := moveIndexes(tx, cur, next); err != nil {
			return err
		}
		if cur.State != next.State {
			if err := addCount(tx, cur.State, -1); err != nil {
				return err
			}
			if err := addCount(tx, next.State, +1); err != nil {
				return err
			}
		}
		out = cloneSandbox(next)
		return nil
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("store: update %s: %w", id, err)
	}
	return out, nil
}

// NodeUsage returns the live use on node; zero for a node with none.
func (s *Store) NodeUsage(ctx context.Context, node string) (store.Usage, error) {
	var u store.Usage
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		u, err = getUsage(tx.Bucket(bucketNodeUsage), node)
		return err
	})
	if err != nil {
		return store.Usage{}, fmt.Errorf("store: node usage %s: %w", node, err)
	}
	return u, nil
}

// validateNew and checkChange are the contract's checks (store.ValidateNew,
// store.CheckChange).
func validateNew(rec store.Sandbox) error { return store.ValidateNew(rec) }

func checkChange(cur, next store.Sandbox) error { return store.CheckChange(cur, next) }

// holdBudget adds (sign +1) or releases (sign -1) rec's resources on its
// node's and its principal's use.
func holdBudget(tx *bbolt.Tx, rec store.Sandbox, sign int64) error {
	if err := addUsage(tx.Bucket(bucketNodeUsage), rec.Node, rec, sign); err != nil {
		return err
	}
	return addUsage(tx.Bucket(bucketPrincipalUsage), rec.Principal, rec, sign)
}

// addUsage adjusts the use stored at key. A release that would go below
// zero can only follow corruption of the file; it clamps at zero rather
// than fail every later end of a sandbox. A use of zero is deleted.
func addUsage(b *bbolt.Bucket, key string, rec store.Sandbox, sign int64) error {
	u, err := getUsage(b, key)
	if err != nil {
		return err
	}
	u.Sandboxes = max(0, u.Sandboxes+sign)
	u.CPUMHz = max(0, u.CPUMHz+sign*rec.CPUMHz)
	u.MemoryMB = max(0, u.MemoryMB+sign*rec.MemoryMB)
	if u == (store.Usage{}) {
		return b.Delete([]byte(key))
	}
	return putJSON(b, key, u)
}

// getUsage reads the use stored at key; zero if absent.
func getUsage(b *bbolt.Bucket, key string) (store.Usage, error) {
	var u store.Usage
	if err := getJSON(b, key, &u); err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Usage{}, err
	}
	return u, nil
}

// cloneSandbox returns rec with its own Labels map and Spec bytes.
func cloneSandbox(rec store.Sandbox) store.Sandbox {
	rec.Labels = maps.Clone(rec.Labels)
	rec.Spec = bytes.Clone(rec.Spec)
	return rec
}
