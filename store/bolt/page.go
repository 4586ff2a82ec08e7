package bolt

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// maxRejects is how many records ListPage examines and rejects (on Labels,
// or on Node when the principal index serves the page) before it returns
// a short page with a Next; store.MinPageScan is the contract's floor.
const maxRejects = 5 * store.MinPageScan

// List returns copies of the records matching f, ordered by CreatedAt,
// then ID, without their spec; an empty, non-nil slice when nothing
// matches. It reads only the index ranges of f's states (live ones with
// LiveOnly) and of f's principal, or else f's node, so its cost follows
// the answer, not the history.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Sandbox, error) {
	states := allStates
	if f.LiveOnly {
		states = liveStates
	}
	p := planFor(states, f.Principal, f.Node, nil)
	out := []store.Sandbox{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		it := p.open(tx, nil)
		for {
			rec, _, ok, err := it.next(tx)
			if err != nil || !ok {
				return err
			}
			if p.matches(rec) {
				out = append(out, rec)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	return out, nil
}

// ListPage returns one page of the records matching q; see store.Store.
// Which index serves it: by_principal when q.Principal is set, by_node
// when q.Node is, by_state otherwise; within that index only the ranges
// of q's states are read, merged in created order. Labels, and Node beside
// Principal, are checked on each record read.
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
	var after []byte
	if q.Cursor != "" {
		if after, err = s.openCursor(p, q.Cursor); err != nil {
			return store.Page{}, fmt.Errorf("store: list page: %w", err)
		}
	}
	page := store.Page{Items: make([]store.Sandbox, 0, min(limit, 64))}
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		it := p.open(tx, after)
		var last []byte // created key of the last item, or of the last rejected record
		rejects := 0
		for {
			if len(page.Items) == limit && p.exact() {
				// The index alone says whether another item follows.
				if it.peek() {
					page.Next = s.sealCursor(p, last)
				}
				return nil
			}
			rec, key, ok, err := it.next(tx)
			if err != nil || !ok {
				return err
			}
			switch {
			case p.matches(rec) && len(page.Items) == limit:
				page.Next = s.sealCursor(p, last)
				return nil
			case p.matches(rec):
				page.Items = append(page.Items, rec)
				last = key
			default:
				last = key
				if rejects++; rejects >= maxRejects {
					page.Next = s.sealCursor(p, last)
					return nil
				}
			}
		}
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("store: list page: %w", err)
	}
	return page, nil
}

// plan is how a query is read: the ranges of one index bucket, and what
// is left to check on each record.
type plan struct {
	bucket   []byte
	prefixes [][]byte // one range per state, each holding created keys
	node     string   // checked per record: "" when the index serves it
	labels   map[string]string

	// identity is the query in canonical form, signed into its cursors.
	identity []byte
}

// planFor chooses the index for a query of states (in code order,
// without repeats) with the given principal, node and labels.
func planFor(states []store.State, principal, node string, labels map[string]string) plan {
	p := plan{labels: labels}
	switch {
	case principal != "":
		p.bucket, p.node = bucketByPrincipal, node
		for _, st := range states {
			p.prefixes = append(p.prefixes, ownerPrefix(principal, st))
		}
	case node != "":
		p.bucket = bucketByNode
		for _, st := range states {
			p.prefixes = append(p.prefixes, ownerPrefix(node, st))
		}
	default:
		p.bucket = bucketByState
		for _, st := range states {
			p.prefixes = append(p.prefixes, statePrefix(nil, st))
		}
	}
	id := []byte{cursorVersion}
	for _, st := range states {
		id = statePrefix(id, st)
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

// open positions the plan's ranges just after the created key after (at
// their start for nil).
func (p plan) open(tx *bbolt.Tx, after []byte) *merge {
	m := &merge{bucket: p.bucket}
	b := tx.Bucket(p.bucket)
	for _, prefix := range p.prefixes {
		r := &span{c: b.Cursor(), prefix: prefix}
		r.seek(after)
		m.spans = append(m.spans, r)
	}
	return m
}

// span is one range of an index: the keys that start with prefix, each
// the prefix followed by a created key.
type span struct {
	c      *bbolt.Cursor
	prefix []byte
	key    []byte // the current key; nil past the range
}

func (r *span) seek(after []byte) {
	start := append(bytes.Clone(r.prefix), after...)
	k, _ := r.c.Seek(start)
	if after != nil && bytes.Equal(k, start) {
		k, _ = r.c.Next()
	}
	r.set(k)
}

func (r *span) advance() {
	k, _ := r.c.Next()
	r.set(k)
}

func (r *span) set(k []byte) {
	if k != nil && bytes.HasPrefix(k, r.prefix) {
		r.key = k
	} else {
		r.key = nil
	}
}

// created is the current key's created part.
func (r *span) created() []byte { return r.key[len(r.prefix):] }

// merge walks several spans of one bucket as one, in created order. A
// record is in exactly one state's range, so no key repeats.
type merge struct {
	bucket []byte
	spans  []*span
}

// head returns the span holding the smallest current key; nil when every
// span is past its range.
func (m *merge) head() *span {
	var best *span
	for _, r := range m.spans {
		if r.key != nil && (best == nil || bytes.Compare(r.created(), best.created()) < 0) {
			best = r
		}
	}
	return best
}

// peek reports whether another key follows, reading no record.
func (m *merge) peek() bool { return m.head() != nil }

// next decodes the next record and returns it with its created key (valid
// until tx ends); ok is false past the end.
func (m *merge) next(tx *bbolt.Tx) (rec store.Sandbox, created []byte, ok bool, err error) {
	r := m.head()
	if r == nil {
		return store.Sandbox{}, nil, false, nil
	}
	created = r.created()
	r.advance()
	id, err := idOf(created)
	if err != nil {
		return store.Sandbox{}, nil, false, err
	}
	rec, err = loadIndexed(tx, m.bucket, id)
	if err != nil {
		return store.Sandbox{}, nil, false, err
	}
	return rec, created, true, nil
}
