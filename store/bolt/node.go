package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// PutNode creates or replaces the record of n.Name (store.ErrInvalid when
// empty). A zero UpdatedAt is set to now.
func (s *Store) PutNode(ctx context.Context, n store.Node) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: put node %s: %w", n.Name, err)
	}
	if n.Name == "" {
		return fmt.Errorf("store: put node: %w", invalid("name", "empty"))
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = s.now()
	}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		return putJSON(tx.Bucket(bucketNodes), n.Name, n)
	})
	if err != nil {
		return fmt.Errorf("store: put node %s: %w", n.Name, err)
	}
	return nil
}

// GetNode returns the record of name, or store.ErrNotFound.
func (s *Store) GetNode(ctx context.Context, name string) (store.Node, error) {
	var n store.Node
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return getJSON(tx.Bucket(bucketNodes), name, &n)
	})
	if err != nil {
		return store.Node{}, fmt.Errorf("store: get node %s: %w", name, err)
	}
	return n, nil
}

// ListNodes returns every node record ordered by name; an empty, non-nil
// slice when there are none.
func (s *Store) ListNodes(ctx context.Context) ([]store.Node, error) {
	out := []store.Node{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		// bbolt iterates keys in byte order, which is name order.
		return tx.Bucket(bucketNodes).ForEach(func(k, v []byte) error {
			var n store.Node
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("decode %q: %w", k, err)
			}
			out = append(out, n)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list nodes: %w", err)
	}
	return out, nil
}

// DeleteNode removes the record of name; store.ErrNotFound if absent. The
// node's budget use is not touched: it belongs to its live sandboxes.
func (s *Store) DeleteNode(ctx context.Context, name string) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketNodes)
		if b.Get([]byte(name)) == nil {
			return store.ErrNotFound
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("store: delete node %s: %w", name, err)
	}
	return nil
}

// getNodeRecord returns the node record of name, nil when there is none.
func getNodeRecord(tx *bbolt.Tx, name string) (*store.Node, error) {
	var n store.Node
	err := getJSON(tx.Bucket(bucketNodes), name, &n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &n, nil
}
