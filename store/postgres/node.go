package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
)

// PutNode creates or replaces the record of n.Name (store.ErrInvalid when
// empty). A zero UpdatedAt is set to now.
func (s *Store) PutNode(ctx context.Context, n store.Node) error {
	if n.Name == "" {
		return fmt.Errorf("store: put node: %w", store.Invalid("name", "empty"))
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = s.now()
	}
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("store: put node %s: %w", n.Name, err)
	}
	err = s.tx(ctx, func(p pgx.Tx) error {
		_, err := p.Exec(ctx, `INSERT INTO nodes (name, record) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET record = EXCLUDED.record`, []byte(n.Name), body)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put node %s: %w", n.Name, err)
	}
	return nil
}

// GetNode returns the record of name, or store.ErrNotFound.
func (s *Store) GetNode(ctx context.Context, name string) (store.Node, error) {
	var n store.Node
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		var body []byte
		if err := p.QueryRow(ctx, `SELECT record FROM nodes WHERE name = $1`, []byte(name)).Scan(&body); err != nil {
			return notFound(err)
		}
		return json.Unmarshal(body, &n)
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
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, `SELECT record FROM nodes ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				body []byte
				n    store.Node
			)
			if err := rows.Scan(&body); err != nil {
				return err
			}
			if err := json.Unmarshal(body, &n); err != nil {
				return fmt.Errorf("decode node: %w", err)
			}
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: list nodes: %w", err)
	}
	return out, nil
}

// DeleteNode removes the record of name; store.ErrNotFound if absent. The
// node's use, which its live records hold, is left as it is.
func (s *Store) DeleteNode(ctx context.Context, name string) error {
	err := s.tx(ctx, func(p pgx.Tx) error {
		tag, err := p.Exec(ctx, `DELETE FROM nodes WHERE name = $1`, []byte(name))
		if err == nil && tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete node %s: %w", name, err)
	}
	return nil
}
