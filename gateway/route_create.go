package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/nomad/api"
	"github.com/labstack/echo/v4"

	"sandgate/gateway/testhook"
	"sandgate/gateway/token"
	"sandgate/gateway/wire"
	"sandgate/jobspec"
	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/render"
	"sandgate/store"
)

// createSandbox is POST /v1/sandboxes: pick or check the node, render,
// admit and reserve in one store transaction, register, wait for the
// allocation. A failed registration or placement releases the budget and
// leaves no job behind.
func (s *Server) createSandbox(c echo.Context) error {
	testhook.Pause(testhook.CreateAuthorized)
	ctx := c.Request().Context()
	cl := callerOf(c)
	body := bodyOf[*createRequest](c)
	if body == nil {
		body = &createRequest{}
	}
	// A repeat of a keyed create answers the sandbox the key made.
	idem, err := idempotencyOf(c, cl, body)
	if err != nil {
		return err
	}
	if idem != nil {
		if rec, ok, err := s.earlierCreate(c, idem); err != nil || ok {
			if err != nil {
				return err
			}
			return s.answerRepeat(c, body, idem, rec)
		}
	}
	st := s.cfg.Engine.Settings()
	now := s.cfg.Now().UTC().Truncate(time.Second)
	cpu := deref(body.CPUMHz, int64(st.Sandbox.DefaultCPUMHz))
	mem := deref(body.MemoryMB, int64(st.Sandbox.DefaultMemoryMB))

	// A create that names no node goes to the least loaded one with room.
	// Concurrent creates can fill that node between the pick and the
	// reservation: when the node's budget (B1) is then the only ground of
	// the policy's refusal, another node is picked and decided on afresh,
	// up to maxRepicks times. Every attempt is a whole admission decision.
	var (
		exclude []string
		res     reservation
		denied  error // the policy's B1 refusal of the last node tried
	)
	for {
		cand, err := s.pickNode(ctx, deref(body.Node, ""), cpu, mem, exclude)
		var p *Problem
		switch {
		case err != nil && denied != nil && errors.As(err, &p) && p.Code == wire.CodeBudgetExhausted:
			return denied // only nodes already tried are left
		case err != nil:
			return err
		case cand.full && denied != nil:
			return denied // every node that had room was tried
		}
		res, err = s.reserveOn(c, cl, createPlan{body: body, settings: st, cpu: cpu, mem: mem, now: now, idem: idem}, cand)
		if err == nil {
			break
		}
		// A racing repeat of the key reserved first: answer its sandbox.
		if conflict := (*store.IdempotencyConflictError)(nil); errors.As(err, &conflict) {
			rec, gerr := s.cfg.Store.Get(ctx, conflict.ID)
			if gerr != nil {
				return unavailable("the store could not be read; nothing was changed", gerr)
			}
			return s.answerRepeat(c, body, idem, rec)
		}
		if deref(body.Node, "") != "" || cand.full || len(exclude) >= maxRepicks || !nodeBudgetOnly(err) {
			return err
		}
		denied = err
		exclude = append(exclude, cand.node.Name)
	}
	rec, job, raw := res.rec, res.job, res.token
	handedOff := false
	defer func() {
		if !handedOff {
			s.inflight.Delete(rec.ID)
		}
	}()
	testhook.Pause(testhook.CreateReserved)

	evalID, err := s.cfg.Nomad.Register(ctx, job)
	if err != nil {
		s.failStart(rec, "register_failed", err)
		return nomadUnavailable("Nomad refused or did not answer the job registration; the reservation was released and no job is left", err)
	}
	testhook.Pause(testhook.CreateRegistered)
	wait := s.cfg.DefaultWait
	if body.WaitSeconds != nil {
		wait = time.Duration(*body.WaitSeconds) * time.Second
	}
	pl := nomad.Placement{State: nomad.PlacementPending}
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		pl, err = s.cfg.Nomad.WaitPlacement(wctx, rec.JobID, evalID)
		cancel()
		if err != nil {
			s.failStart(rec, "placement_unknown", err)
			return nomadUnavailable("Nomad failed while the sandbox was being placed; the reservation was released and the job purged", err)
		}
	}
	testhook.Pause(testhook.CreatePlaced)
	out, err := s.settle(rec, pl, evalID)
	if err != nil {
		return err
	}
	switch {
	case pl.State == nomad.PlacementFailed && out.State != store.StateEnded:
		// settle ended it: purged, budget released, token revoked (or, if
		// that failed, reconcile ends it: the token is not handed out).
		return placementFailed(out, pl)
	case !out.State.Live():
		// Ended while it was being placed, by another than this create
		// (a destroy by id raced it; its purge is what ended the
		// allocation Nomad reports): that end is the answer, with no
		// sandbox to hand out, nor a token.
		p := endedProblem(out)
		p.SandboxID = out.ID
		return p
	}
	testhook.Pause(testhook.CreateSettled)
	if out.State == store.StateStarting {
		handedOff = true
		s.watchStart(out, evalID)
	}
	v := viewOf(out)
	v.Token = raw
	return c.JSON(http.StatusCreated, v)
}

// maxRepicks bounds how many other nodes a create that names none tries
// after a node filled between its pick and its reservation.
const maxRepicks = 3

// reservation is a create's committed reservation: the record (starting),
// the job to register and the session token to hand out.
type reservation struct {
	rec   store.Sandbox
	job   *api.Job
	token string
}

// nodeBudgetOnly reports an admission refusal whose one ground is the
// node's budget (B1): another node may have room.
func nodeBudgetOnly(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == http.StatusTooManyRequests && slices.Equal(p.RuleIDs, []string{"B1"})
}

// createPlan is what every attempt of one create shares: the body, the
// bundle settings read once at its start, the resources and the time.
type createPlan struct {
	body     *createRequest
	settings policies.Settings
	cpu, mem int64
	now      time.Time
	idem     *idempotency // nil: no Idempotency-Key
}

// reserveOn renders the sandbox for cand, mints its session token and, in
// one store transaction, asks the admission policy with the node's and the
// principal's current use and reserves the budget. On any error nothing is
// written.
func (s *Server) reserveOn(c echo.Context, cl *caller, plan createPlan, cand candidate) (reservation, error) {
	ctx := c.Request().Context()
	var admitted policies.Decision
	body, st, cpu, mem, now := plan.body, plan.settings, plan.cpu, plan.mem, plan.now
	spec, job, jobJSON, err := jobspec.Render(st, jobspec.Request{
		Node: cand.node.Name, Arch: cand.node.Attributes["cpu.arch"],
		Profile: deref(body.Profile, ""), Network: deref(body.Network, ""),
		TTL:    time.Duration(deref(body.TTLSeconds, 0)) * time.Second,
		CPUMHz: int(cpu), MemoryMB: int(mem), Image: deref(body.Image, ""),
		Namespace: s.cfg.Namespace,
	}, now)
	if err != nil {
		var fe *render.FieldError
		if errors.As(err, &fe) {
			return reservation{}, invalid(fe.Field, "%s", fe.Reason)
		}
		return reservation{}, fmt.Errorf("render: %w", err)
	}
	usage, err := s.cfg.Nomad.NodeUsage(ctx, cand.node.ID)
	if err != nil {
		return reservation{}, nomadUnavailable("could not read the usage of node "+cand.node.Name+"; nothing was changed", err)
	}
	allocated, err := s.allocated.get(ctx, cand.node.ID)
	if err != nil {
		return reservation{}, nomadUnavailable("could not read the allocations of node "+cand.node.Name+"; nothing was changed", err)
	}
	capacity := nodefacts.Capacity(cand.node, &allocated)
	raw, claims, err := s.cfg.Tokens.Mint(token.MintRequest{
		Role: token.RoleSession, Subject: spec.ID, SandboxID: spec.ID,
		Scopes: st.SessionScopes(), ExpiresAt: spec.CeilingAt(),
	})
	if err != nil {
		return reservation{}, fmt.Errorf("mint session token: %w", err)
	}
	rec := store.Sandbox{
		ID: spec.ID, JobID: spec.JobID(), Node: spec.Node, Principal: cl.principal(),
		Profile: string(spec.Profile), Network: string(spec.Network), Image: spec.Image,
		CPUMHz: cpu, MemoryMB: mem, Labels: body.Labels, State: store.StateStarting,
		CreatedAt: now, ExpiresAt: now.Add(spec.TTL), CeilingAt: spec.CeilingAt(), UpdatedAt: now,
		TokenDigest: token.Digest(raw), TokenJTI: claims.ID, Spec: jobJSON, Creator: s.lease.holder,
	}
	if plan.idem != nil {
		rec.IdempotencyKey, rec.RequestDigest = plan.idem.key, plan.idem.digest
	}
	if rec.ExpiresAt.After(rec.CeilingAt) {
		rec.ExpiresAt = rec.CeilingAt
	}
	// In flight from before the reservation commits: reconcile must never
	// see this live record without knowing its job is about to exist.
	s.inflight.Store(rec.ID, struct{}{})
	def := st.NodeBudgetDefault
	var quota int64
	if t := callerToken(c); t != nil {
		quota = t.MaxLiveSandboxes
	}
	err = s.cfg.Store.Reserve(ctx, rec, func(f store.ReserveFacts) error {
		node := nodefacts.Of(cand.node, cand.controlPlane, f.NodeInfo, &usage)
		node.Capacity = capacity
		in := jobspec.AdmissionInput(spec, jobJSON, node, policies.Budget{
			Limits: nodefacts.Limits(f.NodeInfo, def, nodefacts.Room(capacity)),
			Used:   policies.BudgetUse{Sandboxes: f.Node.Sandboxes, CPUMHz: f.Node.CPUMHz, MemoryMB: f.Node.MemoryMB},
		}, policies.PrincipalFacts{
			Sub: cl.claims.Subject, Role: string(cl.claims.Role),
			LiveSandboxes: f.Principal.Sandboxes, MaxLiveSandboxes: quota,
		}, jobspec.NomadMounts(st))
		v, err := in.Value()
		if err != nil {
			return fmt.Errorf("admission input: %w", err)
		}
		d, err := s.decide(ctx, policies.Admission, v, in, cl.principal(), factsOf(c))
		if err != nil {
			return err
		}
		if !d.Allow {
			return admissionDenial(d)
		}
		admitted = d
		testhook.Pause(testhook.CreateAdmitted)
		return nil
	})
	if err != nil {
		s.inflight.Delete(rec.ID)
		var p *Problem
		if errors.As(err, &p) {
			return reservation{}, p
		}
		if de := (*DecisionError)(nil); errors.As(err, &de) {
			return reservation{}, de // the one error handler answers it (503)
		}
		if conflict := (*store.IdempotencyConflictError)(nil); errors.As(err, &conflict) {
			return reservation{}, conflict // a racing repeat of the key: createSandbox answers its sandbox
		}
		return reservation{}, unavailable("the sandbox could not be reserved; nothing was changed", err)
	}
	warn(c, admitted) // only the decision that admitted: a retried transaction decides again
	return reservation{rec: rec, job: job, token: raw}, nil
}

// admissionDenial maps an admission deny: only budget (B1) is a 429.
func admissionDenial(d policies.Decision) *Problem {
	rules := d.RuleIDs()
	var p *Problem
	// Budgets alone (a node's B1, a principal's quota B3): retry when a
	// sandbox ends.
	if len(rules) > 0 && !slices.ContainsFunc(rules, func(r string) bool { return r != "B1" && r != "B3" }) {
		p = newProblem(http.StatusTooManyRequests, wire.CodeBudgetExhausted, violationsDetail(d))
		p.RetryAfter = 30 * time.Second
	} else {
		p = newProblem(http.StatusForbidden, wire.CodePolicyDenied, violationsDetail(d))
	}
	p.RuleIDs, p.Violations, p.DecisionID = rules, violationsOf(d.Violations), d.ID
	return p
}

// placementFailed is the answer to a create whose sandbox Nomad refused to
// place, or whose task failed to start, while the create waited: never a
// 201. A node Nomad found full (another scheduler took the room after
// admission, B1) is a 429; anything else a 503. Both carry Retry-After;
// the record has ended failed, its job is purged, its budget released and
// its session token void (docs/api.md, placement_failed).
func placementFailed(rec store.Sandbox, pl nomad.Placement) *Problem {
	status, retry := http.StatusServiceUnavailable, 10
	if pl.Exhausted {
		status, retry = http.StatusTooManyRequests, 30
	}
	outcome := "the sandbox failed, its job was purged and its budget released"
	if rec.State.Live() {
		outcome = "the sandbox could not be ended yet; reconciliation ends it and releases its budget"
	}
	p := newProblem(status, wire.CodePlacementFailed, fmt.Sprintf(
		"Nomad could not place or start sandbox %s on node %s: %s; %s", rec.ID, rec.Node, pl.Reason, outcome))
	p.RetryAfter = time.Duration(retry) * time.Second
	p.EndReason = rec.EndReason
	if !rec.EndedAt.IsZero() {
		t := rec.EndedAt
		p.EndedAt = &t
	}
	p.SandboxID = rec.ID
	return p
}

// settle records a placement outcome: running, failed (job purged, budget
// released) or still starting.
func (s *Server) settle(rec store.Sandbox, pl nomad.Placement, evalID string) (store.Sandbox, error) {
	ctx, cancel := context.WithTimeout(s.ctx, callTimeout)
	defer cancel()
	switch pl.State {
	case nomad.PlacementRunning:
		out, err := s.cfg.Store.Update(ctx, rec.ID, func(r *store.Sandbox) error {
			if r.State != store.StateStarting {
				return errNotStarting
			}
			r.State, r.AllocID = store.StateRunning, pl.AllocID
			return nil
		})
		if errors.Is(err, errNotStarting) {
			// Ended while it was being placed (a destroy raced the create):
			// make sure the job does not outlive its record.
			ended, gerr := s.cfg.Store.Get(ctx, rec.ID)
			if gerr != nil {
				return ended, unavailable("the sandbox record could not be read", gerr)
			}
			if perr := s.purgeOrphan(ctx, rec.JobID, &ended); perr != nil {
				s.log.Warn("purge the job of a sandbox ended during create; reconcile will retry", "sandbox", rec.ID, "err", perr)
			}
			return ended, nil
		}
		if err != nil {
			// The sandbox runs but nothing durable says so, and the create
			// is about to be answered 503: undo it, so no sandbox runs
			// that its caller was told does not exist. When the store is
			// still down, the record stays starting with no job, and
			// reconcile ends it (job_missing) once the store answers.
			s.failStart(rec, "record_failed", err)
			return out, unavailable("the sandbox's record could not be updated: its job was purged and its budget is released (at once, or by reconciliation once the store answers)", err)
		}
		return out, nil
	case nomad.PlacementFailed:
		s.failStart(rec, "placement_failed", errors.New(pl.Reason))
		return s.cfg.Store.Get(ctx, rec.ID)
	}
	return s.cfg.Store.Get(ctx, rec.ID)
}

var (
	errNotStarting = errors.New("sandbox is no longer starting")
	errNotLive     = errors.New("sandbox is no longer live")
)

// watchStart follows a sandbox that was still starting when its create
// answered, until it runs, fails, or StartTimeout passes (then it fails).
func (s *Server) watchStart(rec store.Sandbox, evalID string) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.inflight.Delete(rec.ID)
		left := rec.CreatedAt.Add(s.cfg.StartTimeout).Sub(s.cfg.Now())
		if floor := min(10*time.Second, s.cfg.StartTimeout); left < floor {
			left = floor // a record found by reconcile gets one real look
		}
		ctx, cancel := context.WithTimeout(s.ctx, left)
		defer cancel()
		pl, err := s.cfg.Nomad.WaitPlacement(ctx, rec.JobID, evalID)
		// A transient Nomad error while watching is retried until the
		// deadline: giving up here would purge a sandbox that may be fine.
		for err != nil && ctx.Err() == nil {
			s.log.Warn("watching a starting sandbox; retrying", "sandbox", rec.ID, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				pl, err = s.cfg.Nomad.WaitPlacement(ctx, rec.JobID, evalID)
			}
		}
		if err != nil && ctx.Err() != nil && s.ctx.Err() == nil {
			err, pl = nil, nomad.Placement{State: nomad.PlacementPending}
		}
		if s.ctx.Err() != nil {
			return // shutting down: reconcile picks it up on the next start
		}
		switch {
		case err != nil:
			s.failStart(rec, "placement_unknown", err)
		case pl.State == nomad.PlacementPending:
			s.failStart(rec, "start_timeout", fmt.Errorf("no allocation ran within %s", s.cfg.StartTimeout))
		default:
			if _, err := s.settle(rec, pl, evalID); err != nil {
				s.log.Error("settle placement", "sandbox", rec.ID, "err", err)
			}
		}
	}()
}

// createRequest is POST /v1/sandboxes.
type createRequest wire.CreateRequest

func (r *createRequest) required() bool { return false }

func (r *createRequest) policyBody() policies.RequestBody {
	return policies.RequestBody{
		Profile: r.Profile, Network: r.Network, TTLSeconds: r.TTLSeconds,
		CPUMHz: r.CPUMHz, MemoryMB: r.MemoryMB, Image: r.Image, Node: r.Node,
		ReissueToken: r.ReissueToken,
	}
}

func (r *createRequest) check(s *Server) error {
	if len(r.Labels) > maxLabels {
		return invalid("labels", "at most %d labels", maxLabels)
	}
	for k, v := range r.Labels {
		if !labelKey.MatchString(k) {
			return invalid("labels", "key %q must match %s", k, labelKey)
		}
		if len(v) > maxLabelValueSize || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return invalid("labels."+k, "must be UTF-8 text of at most %d bytes", maxLabelValueSize)
		}
	}
	if r.WaitSeconds != nil {
		if maxW := int64(s.cfg.MaxWait.Seconds()); *r.WaitSeconds < 0 || *r.WaitSeconds > maxW {
			return invalid("wait_seconds", "must be an integer in [0, %d]", maxW)
		}
	}
	return nil
}
