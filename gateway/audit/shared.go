package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"sandgate/store"
)

// The shared log: with Config.Shared (the PostgreSQL store several
// replicas share), every decision is also appended there before its line
// is written to this replica's file, and Query and Each read the shared
// log, so GET /v1/decisions, replay and the dashboard answer for every
// replica of the deployment. An append that fails fails Write: the
// decision is refused, as when the file cannot take it.

// sharedTimeout bounds one append to the shared log (the store's own
// statement timeout is usually shorter).
const sharedTimeout = 10 * time.Second

// maxShipment is the most decisions one append carries.
const maxShipment = 256

// shipper appends decisions to the shared log by group commit: a writer
// that finds no append in flight appends what is queued, its own decision
// first among them; the writers that queue meanwhile wait for the next
// append, which one of them (or a goroutine the first one leaves behind)
// makes. Under load the appends grow instead of multiplying, and no
// writer waits for more than two of them.
type shipper struct {
	sink store.DecisionLog

	mu    sync.Mutex
	queue []shipment
	busy  bool // an append is in flight, or about to be
}

type shipment struct {
	d    store.Decision
	done chan error
}

// ship appends d to the shared log and returns the append's error.
func (s *shipper) ship(d store.Decision) error {
	done := make(chan error, 1)
	s.mu.Lock()
	s.queue = append(s.queue, shipment{d: d, done: done})
	lead := !s.busy
	s.busy = true
	s.mu.Unlock()
	if lead {
		s.flush()
		s.mu.Lock()
		more := len(s.queue) > 0
		if !more {
			s.busy = false
		}
		s.mu.Unlock()
		if more {
			// The decisions queued during this append are appended
			// by a goroutine of their own, so this writer returns.
			go s.drain()
		}
	}
	return <-done
}

// drain appends until the queue is empty.
func (s *shipper) drain() {
	for {
		s.flush()
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.busy = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// flush appends one batch of the queue and hands each its result.
func (s *shipper) flush() {
	s.mu.Lock()
	n := min(len(s.queue), maxShipment)
	batch := slices.Clone(s.queue[:n])
	s.queue = slices.Delete(s.queue, 0, n)
	s.mu.Unlock()
	if n == 0 {
		return
	}
	ds := make([]store.Decision, n)
	for i, sh := range batch {
		ds[i] = sh.d
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	err := s.sink.AppendDecisions(ctx, ds)
	cancel()
	if err != nil {
		err = fmt.Errorf("audit: the shared decision log did not take the decision: %w", err)
	}
	for _, sh := range batch {
		sh.done <- err
	}
}

// sharedDecision is e's row in the shared log: the fields a query selects
// on, and its line.
func sharedDecision(e Entry, line []byte) store.Decision {
	rules := slices.Clone(e.RuleIDs)
	for _, v := range e.Violations {
		if !slices.Contains(rules, v.Rule) {
			rules = append(rules, v.Rule)
		}
	}
	return store.Decision{
		ID: e.DecisionID, Time: e.Time, Allow: e.Allow, Principal: e.Principal, Entrypoint: e.Entrypoint,
		Rules: rules, Line: line,
	}
}

// querySharedLog is Query on the shared log: the store selects and
// orders; a page holds a next cursor only when more follow (one more is
// asked for to tell; a page of the store's largest may name a next page
// that is empty).
func (l *Log) querySharedLog(q Query, cur *cursor) (Page, error) {
	sq := store.DecisionQuery{
		Since: q.Since, Until: q.Until, Allow: q.Allow, Rule: q.Rule, Principal: q.Principal, Entrypoint: q.Entrypoint,
		Limit: min(q.Limit+1, store.MaxDecisionQuery),
	}
	if cur != nil {
		sq.After = store.DecisionPosition{Time: cur.Time, ID: cur.DecisionID}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	ds, err := l.cfg.Shared.Decisions(ctx, sq)
	if err != nil {
		return Page{}, fmt.Errorf("audit: query the shared decision log: %w", err)
	}
	more := len(ds) > q.Limit || (sq.Limit == q.Limit && len(ds) == q.Limit)
	if len(ds) > q.Limit {
		ds = ds[:q.Limit]
	}
	p := Page{Entries: make([]Entry, 0, len(ds))}
	for _, d := range ds {
		var e Entry
		if err := json.Unmarshal(d.Line, &e); err != nil {
			return Page{}, fmt.Errorf("audit: the shared decision log holds a line that does not parse (decision %s): %w", d.ID, err)
		}
		// The position the store orders by, so a cursor made from it
		// continues exactly there.
		e.Time, e.DecisionID = d.Time, d.ID
		if !q.WithInputs {
			e.Input = nil
		}
		p.Entries = append(p.Entries, e)
	}
	if more {
		last := ds[len(ds)-1]
		p.Next = cursor{Time: last.Time, DecisionID: last.ID}.encode()
	}
	return p, nil
}

// eachShared is Each on the shared log: oldest first, a page at a time.
func (l *Log) eachShared(each func(Entry) error) error {
	var after store.DecisionPosition
	for {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		ds, err := l.cfg.Shared.Decisions(ctx, store.DecisionQuery{Oldest: true, After: after, Limit: store.MaxDecisionQuery})
		cancel()
		if err != nil {
			return fmt.Errorf("audit: read the shared decision log: %w", err)
		}
		for _, d := range ds {
			var e Entry
			if json.Unmarshal(d.Line, &e) != nil {
				continue // as a file's line that does not parse
			}
			if err := each(e); err != nil {
				return err
			}
		}
		if len(ds) < store.MaxDecisionQuery {
			return nil
		}
		last := ds[len(ds)-1]
		after = store.DecisionPosition{Time: last.Time, ID: last.ID}
	}
}

// Prune deletes the shared log's decisions taken before before, at most
// a few batches a call (the reaper calls it every pass), and returns how
// many; nothing without a shared log (the file rotates by size). ctx may
// carry the background lease (store.WithFence): only its holder prunes.
func (l *Log) Prune(ctx context.Context, before time.Time) (int, error) {
	if l.cfg.Shared == nil {
		return 0, nil
	}
	const batch = 1000
	total := 0
	for range 4 {
		n, err := l.cfg.Shared.PruneDecisions(ctx, before, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("audit: prune the shared decision log: %w", err)
		}
		if n < batch {
			break
		}
	}
	return total, nil
}

// Shared reports whether this log reads and writes a shared log.
func (l *Log) Shared() bool { return l.cfg.Shared != nil }
