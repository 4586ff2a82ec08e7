package gateway

import (
	"context"
	"errors"
)

// Reap ends every live sandbox past its expiry or ceiling (L1) and returns
// how many it ended, then prunes ended records past their retention. It
// reads the store's expiry index, so a pass with nothing due costs one
// index read, however long the history, and makes no Nomad call.
func (s *Server) Reap(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	due, err := s.cfg.Store.Due(ctx, now)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, r := range due {
		if now.Before(r.ExpiresAt) && now.Before(r.CeilingAt) {
			continue // the index said due; the record is the authority
		}
		if _, err := s.end(ctx, r.ID, "expired", principalReaper); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if _, err := s.Prune(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.pruneDecisions(ctx); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// pruneDecisions deletes the shared decision log's decisions older than
// Config.DecisionRetention (nothing without a shared log, or with a
// negative retention).
func (s *Server) pruneDecisions(ctx context.Context) error {
	if s.cfg.DecisionRetention < 0 || !s.cfg.Decisions.Shared() {
		return nil
	}
	before := s.cfg.Now().Add(-s.cfg.DecisionRetention)
	n, err := s.cfg.Decisions.Prune(ctx, before)
	if n > 0 {
		s.log.Info("pruned shared decisions past their retention", "decisions", n, "taken_before", before.UTC())
	}
	return err
}

// pruneBatch bounds the records one prune transaction deletes, so a long
// backlog never holds the store's write lock for long.
const pruneBatch = 500

// Prune deletes terminal records that ended more than Config.Retention
// ago, at most a few batches per call (the reaper calls it every pass), and
// returns how many it deleted. The decision log keeps the audit trail of
// every pruned sandbox. A negative Retention keeps records forever.
func (s *Server) Prune(ctx context.Context) (int, error) {
	if s.cfg.Retention < 0 {
		return 0, nil
	}
	before := s.cfg.Now().Add(-s.cfg.Retention)
	total := 0
	for range 4 {
		n, err := s.cfg.Store.Prune(ctx, before, pruneBatch)
		total += n
		if err != nil {
			return total, err
		}
		if n < pruneBatch {
			break
		}
	}
	if total > 0 {
		s.metrics.pruned.Add(float64(total))
		s.log.Info("pruned ended sandbox records past their retention", "records", total, "ended_before", before.UTC())
	}
	return total, nil
}
