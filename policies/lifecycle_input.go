package policies

import "github.com/open-policy-agent/opa/v1/ast"

// LifecycleInput is the input of data.sandgate.lifecycle.decision: one
// action the gateway is about to take on a sandbox or a Nomad job.
type LifecycleInput struct {
	Now int64 `json:"now,omitempty"` // unix seconds
	// Action is "end" (a live sandbox becomes terminal) or "purge" (a job
	// is purged with no sandbox to end: an orphan).
	Action string `json:"action,omitempty"`
	// Reason says why: destroyed, expired, job_missing, placement_failed,
	// register_failed, placement_unknown, start_timeout, record_failed,
	// reclaimed, lost, disk_quota (end); orphan (purge).
	Reason string       `json:"reason,omitempty"`
	Job    LifecycleJob `json:"job"`
	// Sandbox is the record the action concerns; nil for an orphan job
	// with no record at all.
	Sandbox *SandboxRecord   `json:"sandbox,omitempty"`
	Effects LifecycleEffects `json:"effects"`
}

// LifecycleJob is the Nomad job an action concerns.
type LifecycleJob struct {
	ID string `json:"id"`
	// Present says whether Nomad reported the job when the action was decided.
	Present bool `json:"present"`
}

// LifecycleEffects are what the gateway will do if allowed.
type LifecycleEffects struct {
	PurgeJob      bool `json:"purge_job"`
	RevokeToken   bool `json:"revoke_token"`
	ReleaseBudget bool `json:"release_budget"`
}

// Value builds the input document as an ast.Value.
func (in *LifecycleInput) Value() ast.Value {
	o := ast.NewObjectWithCapacity(6)
	putInt(o, "now", in.Now)
	putString(o, "action", in.Action)
	putString(o, "reason", in.Reason)
	job := ast.NewObjectWithCapacity(2)
	job.Insert(ast.InternedTerm("id"), ast.StringTerm(in.Job.ID))
	job.Insert(ast.InternedTerm("present"), ast.InternedTerm(in.Job.Present))
	o.Insert(ast.InternedTerm("job"), ast.NewTerm(job))
	if in.Sandbox != nil {
		o.Insert(ast.InternedTerm("sandbox"), ast.NewTerm(in.Sandbox.value()))
	}
	eff := ast.NewObjectWithCapacity(3)
	eff.Insert(ast.InternedTerm("purge_job"), ast.InternedTerm(in.Effects.PurgeJob))
	eff.Insert(ast.InternedTerm("revoke_token"), ast.InternedTerm(in.Effects.RevokeToken))
	eff.Insert(ast.InternedTerm("release_budget"), ast.InternedTerm(in.Effects.ReleaseBudget))
	o.Insert(ast.InternedTerm("effects"), ast.NewTerm(eff))
	return o
}
