package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sandgate/nomad"
	"sandgate/store"
)

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
		if elsewhere, err := s.creatingElsewhere(ctx, r); elsewhere || err != nil {
			if err != nil {
				errs = append(errs, err)
			}
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

// creatingElsewhere reports a starting record that another replica of a
// shared store may still be creating: its create's inflight mark is in
// that replica's memory, not here, and its job may not be registered yet.
// Such a record is left to the replica that reserved it (its create, or
// the placement watcher it hands off to, settles it) while that replica
// is alive: its process holds its presence (lease.go), however long its
// create waits (wait_seconds may exceed StartTimeout) or however slowly
// a loaded replica gets there. A record whose replica is not present (it
// died mid-create, was stopped, or shared its name with another process)
// is left until StartTimeout has passed since it was created; then
// reconcile settles or ends it. A record this replica reserved (Creator
// names it: this process, whose inflight marks are here, or an earlier
// process of the same name, which died) is never another's. When the
// presence cannot be read, the record is left alone and the error
// returned: reconcile ends nothing on a guess.
func (s *Server) creatingElsewhere(ctx context.Context, r store.Sandbox) (bool, error) {
	if !s.lease.shared() || r.State != store.StateStarting {
		return false, nil
	}
	if name, _, ok := strings.Cut(r.Creator, "#"); ok && name == s.lease.replica {
		return false, nil
	}
	if s.cfg.Now().Sub(r.CreatedAt) < s.cfg.StartTimeout {
		return true, nil
	}
	alive, err := s.lease.alive(ctx, r.Creator)
	if err != nil {
		return true, fmt.Errorf("reconcile %s: is its replica %q alive: %w", r.ID, r.Creator, err)
	}
	return alive, nil
}
