package gateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"sandgate/nomad"
	"sandgate/store"
)

// Run starts the reaper (L1), the usage monitor (R2, R3, H5 and the
// allocation watch: lost sandboxes end) and
// reconciliation (L4, once now and then every ReconcileInterval) and blocks
// until ctx is done.
func (s *Server) Run(ctx context.Context) {
	if err := s.Reconcile(ctx); err != nil {
		s.log.Warn("reconcile at start", "err", err)
	}
	reap := time.NewTicker(s.cfg.ReaperInterval)
	defer reap.Stop()
	rec := time.NewTicker(s.cfg.ReconcileInterval)
	defer rec.Stop()
	monitor := time.NewTicker(s.cfg.ReclaimInterval)
	defer monitor.Stop()
	limits := time.NewTicker(s.cfg.RateLimitWindow)
	defer limits.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-limits.C:
			s.FlushRateLimits()
		case <-reap.C:
			if n, err := s.Reap(ctx); err != nil {
				s.log.Warn("reaper pass", "ended", n, "err", err)
			}
		case <-monitor.C:
			if n, err := s.Reclaim(ctx); err != nil {
				s.log.Warn("usage monitor pass", "reclaimed", n, "err", err)
			}
		case <-rec.C:
			if err := s.Reconcile(ctx); err != nil {
				s.log.Warn("reconcile", "err", err)
			}
		}
	}
}

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
	return n, errors.Join(errs...)
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

// Reconcile makes the store and Nomad agree (L4): a prefixed job with no
// live record is purged; a live record whose job is gone is ended (its
// budget released); a starting record left behind by a restart is settled.
// Sandboxes whose create is in flight are left alone.
func (s *Server) Reconcile(ctx context.Context) error {
	jobs, err := s.cfg.Nomad.ListJobs(ctx)
	if err != nil {
		return err
	}
	live, err := s.cfg.Store.List(ctx, store.Filter{LiveOnly: true})
	if err != nil {
		return err
	}
	byJob := make(map[string]store.Sandbox, len(live))
	for _, r := range live {
		byJob[r.JobID] = r
	}
	var errs []error
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		seen[j.ID] = true
		if _, ok := byJob[j.ID]; ok {
			continue
		}
		var rec *store.Sandbox
		if id, ok := s.sandboxIDOf(j.ID); ok {
			if _, busy := s.inflight.Load(id); busy {
				continue // its create is between reserve and register
			}
			if r, err := s.cfg.Store.Get(ctx, id); err == nil {
				rec = &r
			} else if !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, err)
				continue
			}
		}
		if err := s.purgeOrphan(ctx, j.ID, rec); err != nil {
			errs = append(errs, err)
			continue
		}
		s.metrics.reconcileFixes.WithLabelValues("orphan_job_purged").Inc()
		s.log.Info("reconcile: purged a sandbox job with no live record", "job", j.ID)
	}
	for _, r := range live {
		if _, busy := s.inflight.Load(r.ID); busy {
			continue
		}
		if !seen[r.JobID] {
			// ListJobs may omit a job registered since; confirm before ending.
			if _, err := s.cfg.Nomad.Job(ctx, r.JobID); !errors.Is(err, nomad.ErrNotFound) {
				if err != nil {
					errs = append(errs, err)
				}
				continue
			}
			if err := s.endMissing(ctx, r); err != nil {
				errs = append(errs, err)
				continue
			}
			s.metrics.reconcileFixes.WithLabelValues("record_ended").Inc()
			s.log.Info("reconcile: ended a sandbox whose job is gone", "sandbox", r.ID)
			continue
		}
		if r.State == store.StateStarting {
			s.inflight.Store(r.ID, struct{}{})
			s.watchStart(r, "")
		}
	}
	return errors.Join(errs...)
}

// sandboxIDOf returns the sandbox id a prefixed job id names.
func (s *Server) sandboxIDOf(jobID string) (string, bool) {
	id, ok := strings.CutPrefix(jobID, s.cfg.Engine.Settings().Prefix)
	return id, ok && id != ""
}
