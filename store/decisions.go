package store

import (
	"context"
	"time"
)

// DecisionLog is a store that several gateways share and that also keeps
// their decision logs in one place, so that a query of the decisions
// answers for the whole deployment, whichever replica a load balancer
// picked. A store that is not a DecisionLog serves one gateway, whose own
// file is the whole log.
//
// The store keeps each decision as the line the gateway wrote (Line, its
// JSON) with the fields a query selects on beside it; it never reads the
// line itself.
type DecisionLog interface {
	// AppendDecisions stores ds in one write: all of them or none. A
	// decision whose ID is already stored is kept as it was (a retried
	// append stores nothing twice).
	AppendDecisions(ctx context.Context, ds []Decision) error
	// Decisions returns at most q.Limit decisions matching q: newest
	// first (by Time, then ID), or oldest first with q.Oldest, and only
	// those past q.After when it is set (older than it, or newer with
	// Oldest). ErrInvalid for a limit out of [1, MaxDecisionQuery].
	Decisions(ctx context.Context, q DecisionQuery) ([]Decision, error)
	// PruneDecisions deletes at most limit decisions taken before before,
	// oldest first, in one write, and returns how many it deleted. A
	// limit below 1 is ErrInvalid. Call again while it returns limit.
	PruneDecisions(ctx context.Context, before time.Time, limit int) (int, error)
}

// MaxDecisionQuery is the most decisions one Decisions call returns.
const MaxDecisionQuery = 1000

// Decision is one decision-log line as a shared store keeps it.
type Decision struct {
	// ID is the decision id; Time when it was taken.
	ID   string
	Time time.Time
	// Allow, Principal and Entrypoint are the line's own; Rules every
	// rule id the line names (its rule ids and its violations' rules).
	Allow      bool
	Principal  string
	Entrypoint string
	Rules      []string
	// Line is the line as the gateway wrote it (JSON).
	Line []byte
}

// DecisionQuery selects decisions. Zero fields select everything.
type DecisionQuery struct {
	// Since (inclusive) and Until (exclusive) bound Time.
	Since, Until time.Time
	// Allow, when set, keeps only allowed (true) or refused (false) ones.
	Allow *bool
	// Rule keeps decisions whose Rules hold it; Principal and Entrypoint
	// match exactly.
	Rule, Principal, Entrypoint string
	// Limit is how many to return, 1 to MaxDecisionQuery.
	Limit int
	// Oldest orders oldest first; the default is newest first.
	Oldest bool
	// After, when its ID is set, continues a previous call: only
	// decisions that come after it in the order asked for.
	After DecisionPosition
}

// DecisionPosition is a decision's place in the order: its Time, then its
// ID.
type DecisionPosition struct {
	Time time.Time
	ID   string
}
