// Package store keeps sandgate's durable state: sandbox records, the
// operator's view of nodes (enrollment, state, budget limits), the budget in
// use per node, and token metadata. The default implementation is
// store/bolt; store/storetest is the conformance suite every implementation
// must pass.
//
// Budget use is part of the store's contract, not the caller's: a record
// counts against its node's budget from Reserve until an Update moves it to
// a terminal state, and the store adjusts the node's use in the same
// transaction. Concurrent Reserve calls are serialised, so a check done
// inside Reserve's admit callback can never be overrun (rules B1, B4).
//
// Reading must not grow with history: ListPage, Due, Counts and a List by
// state, principal or node read only what they return. A terminal record
// stays until Prune deletes it once its retention has passed; the decision
// log, not the store, is the lasting audit trail.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors; implementations wrap them with context.
var (
	// ErrNotFound: no record with that key.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: Reserve or PutToken with a key already present.
	ErrExists = errors.New("store: already exists")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid: a record failed validation (empty id, unknown state,
	// negative resources, a forbidden transition), or a query did (a limit
	// out of range, an unknown state, a malformed or foreign cursor).
	ErrInvalid = errors.New("store: invalid record")
	// ErrUnavailable: the store cannot serve now (its database is
	// unreachable, slow past its timeout, read-only or shutting down);
	// nothing was changed, and the same call may succeed later.
	ErrUnavailable = errors.New("store: unavailable")
)

// State is a sandbox's lifecycle state.
type State string

// Sandbox states. Starting and running are live: they hold budget.
// Failed and ended are terminal: budget is released, and a terminal record
// never becomes live again.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateFailed   State = "failed"
	StateEnded    State = "ended"
)

// States lists every state, live ones first. The policy bundle names the
// same states (data.sandgate.config.sandbox.states); a test holds the two
// together.
func States() []State { return []State{StateStarting, StateRunning, StateFailed, StateEnded} }

// Live reports whether the state holds budget.
func (s State) Live() bool { return s == StateStarting || s == StateRunning }

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	switch s {
	case StateStarting, StateRunning, StateFailed, StateEnded:
		return true
	}
	return false
}

// Sandbox is the durable record of one sandbox.
type Sandbox struct {
	ID        string            `json:"id"`
	JobID     string            `json:"job_id"`
	Node      string            `json:"node"`      // Nomad node name
	Principal string            `json:"principal"` // role:sub of the token that created it, e.g. "agent:ci"
	Profile   string            `json:"profile"`
	Network   string            `json:"network"`
	Image     string            `json:"image"`
	CPUMHz    int64             `json:"cpu_mhz"`
	MemoryMB  int64             `json:"memory_mb"`
	Labels    map[string]string `json:"labels,omitempty"`
	State     State             `json:"state"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	CeilingAt time.Time         `json:"ceiling_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	EndedAt   time.Time         `json:"ended_at,omitzero"`
	// EndReason says why a terminal record ended: destroyed, expired,
	// job_missing, placement_failed, register_failed, reclaimed, lost,
	// disk_quota.
	EndReason string `json:"end_reason,omitempty"`
	// AllocID is the Nomad allocation once one is placed.
	AllocID string `json:"alloc_id,omitempty"`
	// TokenDigest is the hex SHA-256 of the session token; empty once
	// revoked. The token itself is never stored (rule T1).
	TokenDigest string `json:"token_digest,omitempty"`
	TokenJTI    string `json:"token_jti,omitempty"`
	// Spec is the rendered job as submitted (JSON), for audit and reconcile.
	// Get and Update carry it; List, ListPage and Due leave it nil (read it
	// with Store.Spec), so listing history never decodes rendered jobs.
	Spec      []byte `json:"spec,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// IdempotencyKey is the hex SHA-256 of the principal, a NUL and the
	// Idempotency-Key its create carried; empty without one.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// RequestDigest is the hex SHA-256 of that create's body, so a repeat
	// with another body is told apart.
	RequestDigest string `json:"request_digest,omitempty"`
	// Creator is the gateway process that reserved the record: its
	// replica's name, "#" and the id of the process. On a store that
	// several replicas share, a starting record whose creator is another
	// replica may be that replica's create in flight.
	Creator string `json:"creator,omitempty"`
}

// IdempotencyWindow is how long an Idempotency-Key answers the sandbox it
// created.
const IdempotencyWindow = 24 * time.Hour

// IdempotencyConflictError is Reserve's refusal of a record whose
// IdempotencyKey an earlier record within the idempotency window already
// holds (a racing repeat): ID is that record's.
type IdempotencyConflictError struct{ ID string }

func (e *IdempotencyConflictError) Error() string {
	return "store: idempotency key already used by sandbox " + e.ID
}

// Usage is what live sandboxes hold on one node, or for one principal.
type Usage struct {
	Sandboxes int64 `json:"sandboxes"`
	CPUMHz    int64 `json:"cpu_mhz"`
	MemoryMB  int64 `json:"memory_mb"`
}

// ReserveFacts are handed to Reserve's admit callback, read inside the
// write transaction that will insert the record.
type ReserveFacts struct {
	Node      Usage // live use on the record's node, excluding the new record
	Principal Usage // live use by the record's principal, excluding the new record
	NodeInfo  *Node // the node's operator record, nil when there is none
}

// Filter selects sandboxes in List. Zero fields match everything.
type Filter struct {
	Principal string
	Node      string
	LiveOnly  bool
}

// Page sizes for Query.Limit.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// MinPageScan is the fewest records an implementation examines for one
// page before it may return a short page that is not the last (see Page).
const MinPageScan = 1000

// Query selects one page of sandboxes in ListPage. Zero fields match
// everything.
type Query struct {
	// States keeps records in any of these states; empty means all four.
	// An unknown state is ErrInvalid.
	States []State
	// Principal keeps one principal's records.
	Principal string
	// Node keeps one node's records.
	Node string
	// Labels keeps records carrying every one of these label values.
	Labels map[string]string
	// Limit is the most items on the page: 1 to MaxPageLimit, 0 for
	// DefaultPageLimit; anything else is ErrInvalid.
	Limit int
	// Cursor continues after a previous page: that page's Next, handed
	// back with the same States, Principal, Node and Labels (Limit may
	// differ). Empty starts at the beginning. A cursor that does not decode,
	// was altered, or came from another query or another store is
	// ErrInvalid.
	Cursor string
}

// Page is one page of ListPage's answer.
type Page struct {
	// Items are ordered by CreatedAt, then ID, and carry no Spec.
	Items []Sandbox
	// Next is the cursor of the following page; empty on the last page.
	// A page that is not the last holds Limit items, except when Labels
	// (or Node together with Principal) rejected at least MinPageScan
	// records while filling it: then it may be short, even empty, so a
	// caller keeps following Next until it is empty.
	Next string
}

// Node is the operator's record of a Nomad client node.
type Node struct {
	Name string `json:"name"`
	// Enrollment: none, sandbox or sandbox+egress.
	Enrollment string `json:"enrollment"`
	// State: active, frozen, reserved or draining.
	State string `json:"state"`
	// Budget limits for this node (rule B1); zero values mean "use the
	// policy data's node_budget_default".
	MaxSandboxes int64     `json:"max_sandboxes"`
	CPUMHz       int64     `json:"cpu_mhz"`
	MemoryMB     int64     `json:"memory_mb"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Token is the metadata of an operator or agent token. The token itself is
// never stored.
type Token struct {
	JTI       string    `json:"jti"`
	Role      string    `json:"role"`
	Subject   string    `json:"sub"`
	Label     string    `json:"label,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	LastUsed  time.Time `json:"last_used,omitzero"`
	// MaxLiveSandboxes is an agent's quota (rule B3); zero: policy default.
	MaxLiveSandboxes int64 `json:"max_live_sandboxes,omitempty"`
}

// Store is sandgate's durable state. Every method honours ctx before it
// starts work; a write either happens completely or not at all.
type Store interface {
	// Reserve inserts rec (which must be live) if admit, called inside the
	// same write transaction with the current use, returns nil. admit's
	// error is returned unwrapped-comparable (errors.Is/As work on it) and
	// nothing is written. ErrExists if rec.ID is taken. With an
	// IdempotencyKey, *IdempotencyConflictError (before admit runs) when a
	// record created within IdempotencyWindow before rec holds the key and
	// did not fail: racing repeats of one key reserve one sandbox.
	Reserve(ctx context.Context, rec Sandbox, admit func(ReserveFacts) error) error
	// Get returns the record or ErrNotFound.
	Get(ctx context.Context, id string) (Sandbox, error)
	// ByIdempotencyKey returns the newest record holding key that was
	// created at or after since and did not fail, or ErrNotFound.
	ByIdempotencyKey(ctx context.Context, key string, since time.Time) (Sandbox, error)
	// List returns every matching record ordered by CreatedAt, then ID,
	// without Spec. With LiveOnly, Principal or Node it reads only the
	// records that match those fields, never the whole history.
	List(ctx context.Context, f Filter) ([]Sandbox, error)
	// ListPage returns one page of the records matching q, ordered by
	// CreatedAt, then ID, without Spec. Its cost follows the page, not the
	// history: States, Principal and Node are served from indexes, so
	// records in other states, of other principals or on other nodes are
	// never read (when Principal and Node are both set, Node is checked
	// on the principal's records). Records written or ended between two
	// pages appear, or not, according to their position relative to the
	// cursor; none is returned twice while its CreatedAt is unchanged.
	ListPage(ctx context.Context, q Query) (Page, error)
	// Due returns the live records whose ExpiresAt or CeilingAt is at or
	// before at (what a reaper ends), ordered by the earlier of the two,
	// then ID, without Spec. When nothing is due it reads no record.
	Due(ctx context.Context, at time.Time) ([]Sandbox, error)
	// Counts returns how many records the store holds in each state, all
	// four states present, in constant time. Pruned records are not
	// counted.
	Counts(ctx context.Context) (map[State]int64, error)
	// Spec returns a record's rendered job (nil when it was stored without
	// one), or ErrNotFound when there is no such record.
	Spec(ctx context.Context, id string) ([]byte, error)
	// Prune deletes at most limit terminal records whose EndedAt is before
	// endedBefore, oldest first, with their spec and index entries, in one
	// write, and returns how many it deleted. Live records are never
	// touched. A limit below 1 is ErrInvalid. A terminal record with a zero
	// EndedAt is aged by its UpdatedAt. Call again while it returns limit.
	Prune(ctx context.Context, endedBefore time.Time, limit int) (int, error)
	// Update applies mutate to the current record in one transaction and
	// returns the result. mutate must not change ID, Node, Principal,
	// CPUMHz or MemoryMB (ErrInvalid), nor make a terminal record live
	// (ErrInvalid). A live-to-terminal change releases the record's budget
	// in the same transaction. An error from mutate aborts and is returned.
	// ErrNotFound if absent.
	Update(ctx context.Context, id string, mutate func(*Sandbox) error) (Sandbox, error)
	// NodeUsage returns the live use on one node (zero for an unknown node).
	NodeUsage(ctx context.Context, node string) (Usage, error)

	// PutNode creates or replaces a node record.
	PutNode(ctx context.Context, n Node) error
	// GetNode returns a node record or ErrNotFound.
	GetNode(ctx context.Context, name string) (Node, error)
	// ListNodes returns all node records ordered by name.
	ListNodes(ctx context.Context) ([]Node, error)
	// DeleteNode removes a node record; ErrNotFound if absent.
	DeleteNode(ctx context.Context, name string) error

	// PutToken records a new token's metadata; ErrExists if the jti is taken.
	PutToken(ctx context.Context, t Token) error
	// GetToken returns a token record or ErrNotFound.
	GetToken(ctx context.Context, jti string) (Token, error)
	// ListTokens returns all token records ordered by CreatedAt, then JTI.
	ListTokens(ctx context.Context) ([]Token, error)
	// RevokeToken sets RevokedAt (idempotent: a second call keeps the first
	// time); ErrNotFound if absent.
	RevokeToken(ctx context.Context, jti string, at time.Time) error
	// TouchToken records a use (LastUsed); implementations may coarsen it.
	TouchToken(ctx context.Context, jti string, at time.Time) error

	// Ping reports whether the store is usable (for /readyz).
	Ping(ctx context.Context) error
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// Importer is a store that also takes records as they are, for moving a
// gateway's state from one store to another (sandgate store migrate). It
// is not part of Store: a gateway never imports.
type Importer interface {
	Store
	// Import stores recs exactly as given, in any state, with their
	// times, spec and idempotency key, and with the budget use and state
	// counts that Reserve and Update would have left, all in one write.
	// Each record must pass ValidateImport (ErrInvalid); a taken id is
	// ErrExists; on any error nothing is written.
	Import(ctx context.Context, recs []Sandbox) error
}
