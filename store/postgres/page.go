package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
	"sandgate/store/orderkey"
)

// maxRejects is how many records ListPage examines and rejects (on Labels,
// or on Node beside Principal) before it returns a short page with a
// Next; store.MinPageScan is the contract's floor.
const maxRejects = 5 * store.MinPageScan

// scanBatch is how many rows one round trip of a filtered page reads.
const scanBatch = 256

// List returns the records matching f, ordered by CreatedAt, then ID,
// without their spec; an empty, non-nil slice when nothing matches. The
// state, principal and node indexes serve it.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Sandbox, error) {
	states := store.States()
	if f.LiveOnly {
		states = []store.State{store.StateStarting, store.StateRunning}
	}
	q := `SELECT record FROM sandboxes WHERE state = ANY($1)`
	args := []any{codes(states)}
	if f.Principal != "" {
		args = append(args, []byte(f.Principal))
		q += ` AND principal = $` + strconv.Itoa(len(args))
	}
	if f.Node != "" {
		args = append(args, []byte(f.Node))
		q += ` AND node = $` + strconv.Itoa(len(args))
	}
	out := []store.Sandbox{}
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, q+` ORDER BY pos`, args...)
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
		return nil, fmt.Errorf("store: list: %w", err)
	}
	return out, nil
}

// ListPage returns one page of the records matching q; see store.Store.
// The principal index serves it when q.Principal is set, the node index
// when q.Node is, the state index otherwise; each of q's states is read as
// its own index range (ordered, limited), and the ranges are merged in
// position order. Labels, and Node beside Principal, are checked on each
// record read, batch by batch, so a page reads at most its items and
// maxRejects other records.
func (s *Store) ListPage(ctx context.Context, q store.Query) (store.Page, error) {
	limit, err := store.PageLimit(q.Limit)
	if err != nil {
		return store.Page{}, fmt.Errorf("store: list page: %w", err)
	}
	states, err := store.QueryStates(q.States)
	if err != nil {
		return store.Page{}, fmt.Errorf("store: list page: %w", err)
	}
	p := planFor(states, q.Principal, q.Node, q.Labels)
	after := []byte{}
	if q.Cursor != "" {
		if after, err = s.openCursor(p, q.Cursor); err != nil {
			return store.Page{}, fmt.Errorf("store: list page: %w", err)
		}
	}
	batch := limit + 1
	if !p.exact() {
		batch = max(batch, scanBatch)
	}
	page := store.Page{Items: make([]store.Sandbox, 0, min(limit, 64))}
	err = s.with(ctx, func(pool *pgxpool.Pool) error {
		var last []byte // position of the last item, or of the last rejected record
		rejects := 0
		for {
			rows, err := p.fetch(ctx, pool, after, batch)
			if err != nil {
				return err
			}
			for _, r := range rows {
				after = r.pos
				switch {
				case p.matches(r.rec) && len(page.Items) == limit:
					page.Next = s.sealCursor(p, last)
					return nil
				case p.matches(r.rec):
					page.Items = append(page.Items, r.rec)
					last = r.pos
				default:
					last = r.pos
					if rejects++; rejects >= maxRejects {
						page.Next = s.sealCursor(p, last)
						return nil
					}
				}
			}
			if len(rows) < batch {
				return nil
			}
		}
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("store: list page: %w", err)
	}
	return page, nil
}

// plan is how a query is read: one index, the ranges of its states, and
// what is left to check on each record.
type plan struct {
	owner  string // "principal", "node" or "" (the state index)
	key    []byte // the owner's value
	states []int16
	node   string // checked per record: "" when the index serves it
	labels map[string]string

	// identity is the query in canonical form, signed into its cursors.
	identity []byte
}

// planFor chooses the index for a query of states (in code order,
// without repeats) with the given principal, node and labels.
func planFor(states []store.State, principal, node string, labels map[string]string) plan {
	p := plan{labels: labels, states: codes(states)}
	switch {
	case principal != "":
		p.owner, p.key, p.node = "principal", []byte(principal), node
	case node != "":
		p.owner, p.key = "node", []byte(node)
	}
	id := []byte{cursorVersion}
	for _, st := range p.states {
		id = append(id, byte(st)) //nolint:gosec // 1..4
	}
	id = appendSized(appendSized(append(id, 0), principal), node)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		id = appendSized(appendSized(id, k), labels[k])
	}
	p.identity = id
	return p
}

// exact reports whether the index alone decides a match.
func (p plan) exact() bool { return p.node == "" && len(p.labels) == 0 }

// matches checks what the index does not.
func (p plan) matches(rec store.Sandbox) bool {
	if p.node != "" && rec.Node != p.node {
		return false
	}
	for k, v := range p.labels {
		if got, ok := rec.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

type positioned struct {
	pos []byte
	rec store.Sandbox
}

// fetch reads the next n rows of the plan's ranges after pos: one ordered,
// limited scan of the index per state, merged.
func (p plan) fetch(ctx context.Context, pool *pgxpool.Pool, after []byte, n int) ([]positioned, error) {
	sql, args := p.query(after, n)
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []positioned
	for rows.Next() {
		var pos, body []byte
		if err := rows.Scan(&pos, &body); err != nil {
			return nil, err
		}
		rec, err := decode(body, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, positioned{pos: pos, rec: rec})
	}
	return out, rows.Err()
}

// query is fetch's statement. The states and the limit are written into
// it, not bound: a generic plan, which PostgreSQL may choose for a
// prepared statement after a few runs, cannot see a small limit and would
// sort a whole state's range instead of walking its index.
func (p plan) query(after []byte, n int) (string, []any) {
	args := []any{after}
	owner := ""
	if p.owner != "" {
		args = append(args, p.key)
		owner = p.owner + ` = $2 AND `
	}
	limit := strconv.Itoa(n)
	parts := make([]string, len(p.states))
	for i, st := range p.states {
		parts[i] = `(SELECT pos, record FROM sandboxes WHERE ` + owner + `state = ` + strconv.Itoa(int(st)) +
			` AND pos > $1 ORDER BY pos LIMIT ` + limit + `)`
	}
	return `SELECT pos, record FROM (` + strings.Join(parts, ` UNION ALL `) + `) r ORDER BY pos LIMIT ` + limit, args
}

// codes are the states' column values.
func codes(states []store.State) []int16 {
	out := make([]int16, len(states))
	for i, st := range states {
		out[i] = stateCodes[st]
	}
	return out
}

// appendSized appends s preceded by its length.
func appendSized(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s))) //nolint:gosec // keys are far below 4 GiB
	return append(dst, s...)
}

// A page cursor is, in unpadded URL-safe base64:
//
//	version (1 byte) | mac (16 bytes) | position of the last record read
//
// mac is HMAC-SHA-256, truncated, under the database's cursor key (meta)
// over the query's canonical form and the position, so a cursor resumes
// only the query and the database that issued it: the same format and the
// same guarantee as the bbolt store's.
const (
	cursorVersion = 1
	cursorMACLen  = 16
)

var cursorEncoding = base64.RawURLEncoding

func (s *Store) sealCursor(p plan, pos []byte) string {
	buf := make([]byte, 0, 1+cursorMACLen+len(pos))
	buf = append(buf, cursorVersion)
	buf = append(buf, s.cursorMAC(p, pos)...)
	return cursorEncoding.EncodeToString(append(buf, pos...))
}

func (s *Store) openCursor(p plan, cursor string) ([]byte, error) {
	raw, err := cursorEncoding.DecodeString(cursor)
	switch {
	case err != nil:
		return nil, store.Invalid("cursor", "not a page cursor (it does not decode)")
	case len(raw) < 1+cursorMACLen+orderkey.TimeLen+1:
		return nil, store.Invalid("cursor", "not a page cursor (too short)")
	case raw[0] != cursorVersion:
		return nil, store.Invalid("cursor", fmt.Sprintf("cursor version %d is not one this sandgate issues", raw[0]))
	}
	mac, pos := raw[1:1+cursorMACLen], raw[1+cursorMACLen:]
	if !hmac.Equal(mac, s.cursorMAC(p, pos)) {
		return nil, store.Invalid("cursor", "it was altered, or issued for another query or another store; start again without a cursor")
	}
	return pos, nil
}

func (s *Store) cursorMAC(p plan, pos []byte) []byte {
	h := hmac.New(sha256.New, s.cursorKey)
	h.Write(appendSized(nil, string(p.identity)))
	h.Write(pos)
	return h.Sum(nil)[:cursorMACLen]
}
