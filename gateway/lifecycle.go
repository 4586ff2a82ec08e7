package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sandgate/gateway/testhook"
	"sandgate/gateway/wire"
	"sandgate/policies"
	"sandgate/store"
)

// callTimeout bounds the gateway's own follow-up work (settling a
// placement, cleaning up after a failed start), which must not depend on a
// client that may have gone away.
const callTimeout = 30 * time.Second

// Principals of the gateway's own actions, as the decision log names them.
const (
	principalReaper    = "system:reaper"
	principalReconcile = "system:reconcile"
	principalCreate    = "system:create"
)

// Every end of a sandbox and every purge of a job is a policy decision
// (data.sandgate.lifecycle.decision: H9, L1, L3, L4, B4), logged like any
// other. A deny leaves the job and the record as they are.

// allEffects is what ending a sandbox does: purge its job, revoke its token
// (the digest is cleared), release its budget (the store releases it on the
// live-to-terminal transition).
var allEffects = policies.LifecycleEffects{PurgeJob: true, RevokeToken: true, ReleaseBudget: true}

// allowLifecycle decides one lifecycle action; a deny is a 403 problem with
// the rule ids, an engine or log failure a 503.
func (s *Server) allowLifecycle(ctx context.Context, in *policies.LifecycleInput, principal string) error {
	in.Now = s.cfg.Now().Unix()
	d, err := s.decide(ctx, policies.Lifecycle, in.Value(), in, principal, nil)
	if err != nil {
		return err
	}
	if d.Allow {
		return nil
	}
	p := newProblem(http.StatusForbidden, wire.CodePolicyDenied, violationsDetail(d))
	p.RuleIDs, p.Violations, p.DecisionID = d.RuleIDs(), violationsOf(d.Violations), d.ID
	return p
}

// endInput is the lifecycle input for ending rec.
func endInput(rec store.Sandbox, reason string, effects policies.LifecycleEffects, jobPresent bool) *policies.LifecycleInput {
	return &policies.LifecycleInput{
		Action: "end", Reason: reason,
		Job:     policies.LifecycleJob{ID: rec.JobID, Present: jobPresent},
		Sandbox: policyRecord(rec), Effects: effects,
	}
}

// end stops a sandbox for reason: the policy decides, then the job is
// purged first (if Nomad fails, the record stays live and still holds its
// budget: nothing is half done), then the record ends, which releases the
// budget and clears the token digest (L3, T4, B4). Ending a terminal record
// is a no-op.
func (s *Server) end(ctx context.Context, id, reason, principal string) (store.Sandbox, error) {
	return s.endBecause(ctx, id, reason, "", principal)
}

// endBecause is end with a last error that says, for people, what happened
// (kept on the record, shown by the API); "" keeps the record's.
func (s *Server) endBecause(ctx context.Context, id, reason, lastError, principal string) (store.Sandbox, error) {
	out, _, err := s.endOnce(ctx, id, reason, lastError, principal)
	return out, err
}

// endOnce is endBecause that also reports whether this call ended the
// sandbox: false when it had ended already, or another end (a destroy on
// another replica, a background pass) recorded its own first.
func (s *Server) endOnce(ctx context.Context, id, reason, lastError, principal string) (store.Sandbox, bool, error) {
	rec, err := s.cfg.Store.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return rec, false, notFound(id)
	}
	if err != nil {
		return rec, false, unavailable("the sandbox store could not be read; nothing was changed", err)
	}
	if !rec.State.Live() {
		return rec, false, nil
	}
	if err := s.allowLifecycle(ctx, endInput(rec, reason, allEffects, true), principal); err != nil {
		return rec, false, err
	}
	testhook.Pause(testhook.EndDecided)
	if err := s.cfg.Nomad.Purge(ctx, rec.JobID); err != nil {
		return rec, false, nomadUnavailable("Nomad did not purge the job; the sandbox is unchanged, retry", err)
	}
	testhook.Pause(testhook.EndPurged)
	out, err := s.markEnded(ctx, id, store.StateEnded, reason, lastError)
	if errors.Is(err, errNotLive) { // ended concurrently: the same outcome
		out, err := s.cfg.Store.Get(ctx, id)
		return out, false, err
	}
	if err != nil {
		return out, false, unavailable("the job was purged but the record could not be updated; reconcile will end it", err)
	}
	testhook.Pause(testhook.EndRecorded)
	s.log.Info("sandbox ended", "sandbox", id, "reason", reason, "by", principal)
	return out, true, nil
}

// failStart ends a sandbox whose create did not start: purge the job (it
// may exist even when Register failed: the answer can be lost), then mark
// the record failed, which releases its budget. If the purge fails the
// record still fails: reconcile purges prefixed jobs without a live record.
//
// When the end cannot be decided now (the engine failed, or the decision
// could not be logged: a shared decision log whose database is down), a
// goroutine asks again every failStartRetry until it is decided or the
// gateway stops: the create was answered as failed, so its sandbox must
// not go on running once the database is back. A gateway that stops
// first leaves the record starting, which reconcile settles or ends.
func (s *Server) failStart(rec store.Sandbox, reason string, cause error) {
	if s.tryFailStart(rec, reason, cause) {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTicker(failStartRetry)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				if s.tryFailStart(rec, reason, cause) {
					return
				}
			}
		}
	}()
}

// failStartRetry is how often failStart asks again for an end it could
// not have decided.
const failStartRetry = time.Second

// tryFailStart is one attempt of failStart; it reports false when the end
// could not be decided (and nothing was done), true when it was decided
// either way.
func (s *Server) tryFailStart(rec store.Sandbox, reason string, cause error) bool {
	ctx, cancel := context.WithTimeout(s.ctx, callTimeout)
	defer cancel()
	if err := s.allowLifecycle(ctx, endInput(rec, reason, allEffects, true), principalCreate); err != nil {
		if de := (*DecisionError)(nil); errors.As(err, &de) && s.ctx.Err() == nil {
			s.log.Warn("the end of a sandbox that did not start could not be decided; asking again", "sandbox", rec.ID, "err", err)
			return false
		}
		s.log.Error("the policy refused to end a sandbox that did not start; it keeps its budget", "sandbox", rec.ID, "err", err)
		return true
	}
	if err := s.cfg.Nomad.Purge(ctx, rec.JobID); err != nil {
		s.log.Warn("purge after a failed start; reconcile will retry", "sandbox", rec.ID, "job", rec.JobID, "err", err)
	}
	if _, err := s.markEnded(ctx, rec.ID, store.StateFailed, reason, cause.Error()); err != nil && !errors.Is(err, errNotLive) {
		s.log.Error("record a failed start", "sandbox", rec.ID, "err", err)
	}
	s.log.Info("sandbox failed to start", "sandbox", rec.ID, "reason", reason, "err", cause)
	return true
}

// endMissing ends a live record whose job Nomad no longer has (L4).
func (s *Server) endMissing(ctx context.Context, rec store.Sandbox) error {
	effects := allEffects
	effects.PurgeJob = false
	if err := s.allowLifecycle(ctx, endInput(rec, "job_missing", effects, false), principalReconcile); err != nil {
		return err
	}
	_, err := s.markEnded(ctx, rec.ID, store.StateEnded, "job_missing", "the Nomad job disappeared")
	if errors.Is(err, errNotLive) {
		return nil
	}
	return err
}

// purgeOrphan purges a prefixed job that no live record claims (L4, H9);
// rec is its terminal record, if any.
func (s *Server) purgeOrphan(ctx context.Context, jobID string, rec *store.Sandbox) error {
	in := &policies.LifecycleInput{
		Action: "purge", Reason: "orphan",
		Job:     policies.LifecycleJob{ID: jobID, Present: true},
		Effects: policies.LifecycleEffects{PurgeJob: true},
	}
	if rec != nil {
		in.Sandbox = policyRecord(*rec)
	}
	if err := s.allowLifecycle(ctx, in, principalReconcile); err != nil {
		return err
	}
	return s.cfg.Nomad.Purge(ctx, jobID)
}

// markEnded moves a live record to a terminal state (releasing its budget
// and clearing its token digest in the same store transaction). It returns
// errNotLive when the record was no longer live.
func (s *Server) markEnded(ctx context.Context, id string, state store.State, reason, lastError string) (store.Sandbox, error) {
	now := s.cfg.Now().UTC()
	out, err := s.cfg.Store.Update(ctx, id, func(r *store.Sandbox) error {
		if !r.State.Live() {
			return errNotLive
		}
		r.State, r.EndedAt, r.EndReason, r.TokenDigest = state, now, reason, ""
		if lastError != "" {
			r.LastError = lastError
		}
		return nil
	})
	if err == nil {
		s.metrics.reaped.WithLabelValues(reason).Inc()
	}
	if errors.Is(err, errNotLive) {
		return out, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return out, err
}
