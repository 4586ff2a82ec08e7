package gateway

import (
	"context"
	"time"
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
