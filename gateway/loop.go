package gateway

import (
	"context"
	"time"
)

// Run starts the background loops and blocks until ctx is done: the
// reaper (L1), the usage monitor (R2, R3, H5 and the allocation watch:
// lost sandboxes end) and reconciliation (L4, once now and then every
// ReconcileInterval). They run on one replica at a time, the holder of
// the background lease (lease.go); every replica tries to take or renew
// it every quarter of LeaseTTL, and a replica that takes it over
// reconciles, reaps and monitors at once. Rate-limit reports are each
// replica's own and run everywhere. At the end the lease is released, so
// another replica takes over at its next try.
func (s *Server) Run(ctx context.Context) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.lease.release(rctx); err != nil {
			s.log.Warn("releasing the background lease", "err", err)
		}
	}()
	if s.lease.shared() {
		present := make(chan struct{})
		defer func() { <-present }() // before the release above
		go func() {
			defer close(present)
			s.keepPresent(ctx)
		}()
	}
	s.refreshLease(ctx)
	s.reconcile(ctx, "reconcile at start") // when this replica holds the lease
	renew := time.NewTicker(max(s.cfg.LeaseTTL/4, time.Millisecond))
	defer renew.Stop()
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
		case <-renew.C:
			if s.refreshLease(ctx) {
				// Taken over: catch up at once rather than after an interval.
				s.reconcile(ctx, "reconcile on taking the background lease")
				s.reap(ctx)
				s.monitor(ctx)
			}
		case <-reap.C:
			s.reap(ctx)
		case <-monitor.C:
			s.monitor(ctx)
		case <-rec.C:
			s.reconcile(ctx, "reconcile")
		}
	}
}

// keepPresent renews this replica's presence (lease.go) every quarter of
// its ttl until ctx is done, and says when another process of the same
// name holds it, or when it could not be renewed.
func (s *Server) keepPresent(ctx context.Context) {
	tick := time.NewTicker(presenceTTL(s.cfg.LeaseTTL) / 4)
	defer tick.Stop()
	var said string // the last thing said, so a state is logged once
	for {
		l, err := s.lease.present(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if said != "error" {
				s.log.Warn("replica presence could not be renewed: another replica may settle this one's starting sandboxes after start_timeout", "replica", s.cfg.Replica, "err", err)
			}
			said = "error"
		case l.Holder != s.lease.holder:
			if said != l.Holder {
				s.log.Warn("another gateway process runs under this replica's name: give each replica a name of its own", "replica", s.cfg.Replica, "other", l.Holder, "self", s.lease.holder)
			}
			said = l.Holder
		default:
			said = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refreshLease takes or renews the background lease and reports whether
// this replica has just taken it.
func (s *Server) refreshLease(ctx context.Context) (taken bool) {
	before := s.lease.status()
	held, taken := s.lease.refresh(ctx)
	if after := s.lease.status(); after.Holder != before.Holder || held != before.Held {
		s.log.Info("background lease", "replica", after.Replica, "holder", after.Holder, "held", held, "epoch", after.Epoch)
	}
	return taken
}

// The passes below run only on the holder of the background lease, with
// a context that carries it: their store writes are refused
// (store.ErrFenced) once another replica has taken it.

func (s *Server) reap(ctx context.Context) {
	fctx, ok := s.lease.fence(ctx)
	if !ok {
		return
	}
	if n, err := s.Reap(fctx); err != nil {
		s.log.Warn("reaper pass", "ended", n, "err", err)
	}
}

func (s *Server) monitor(ctx context.Context) {
	fctx, ok := s.lease.fence(ctx)
	if !ok {
		return
	}
	if n, err := s.Reclaim(fctx); err != nil {
		s.log.Warn("usage monitor pass", "reclaimed", n, "err", err)
	}
}

func (s *Server) reconcile(ctx context.Context, what string) {
	fctx, ok := s.lease.fence(ctx)
	if !ok {
		return
	}
	if err := s.Reconcile(fctx); err != nil {
		s.log.Warn(what, "err", err)
	}
}
