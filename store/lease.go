package store

import (
	"context"
	"errors"
	"time"
)

// ErrFenced refuses a write made under a lease (WithFence) that its
// holder no longer holds: it expired, or another replica took it since.
// Nothing was written. A replica that lost its lease cannot act on stale
// belief through the store.
var ErrFenced = errors.New("store: the lease this write was made under is no longer held")

// Lease is a named lease as it stands: who holds it, until when, and its
// epoch, which grows by one every time the lease changes hands (or is
// taken again after it expired), so a write fenced with an older epoch
// is told apart from the holder's.
type Lease struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder"`
	Epoch   int64     `json:"epoch"`
	Expires time.Time `json:"expires_at"`
}

// Leaser is a store that several gateways share and that elects, through
// leases, the one replica that does a kind of work (the background loops:
// reaper, reconcile, usage monitor). A store that is not a Leaser serves
// one gateway, which holds every lease.
type Leaser interface {
	// AcquireLease takes the named lease for holder when it is free or
	// expired, or renews it when holder holds it, for ttl from the
	// store's own clock (one clock for every replica), and returns the
	// lease as it then stands: Holder == holder when holder has it. A
	// renewal keeps the epoch; a take increments it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends holder's lease at once, so another replica can
	// take it without waiting for it to expire; nothing when holder does
	// not hold it.
	ReleaseLease(ctx context.Context, name, holder string) error
	// LeaseHeld reports whether holder holds the named lease now, by the
	// store's own clock; false for a lease never taken, expired or held
	// by another.
	LeaseHeld(ctx context.Context, name, holder string) (bool, error)
}

type fenceKey struct{}

// WithFence returns ctx carrying l: every write a Leaser's store makes
// with that ctx first checks, in its own transaction, that l.Holder still
// holds l.Name at l.Epoch and that it has not expired, and fails with
// ErrFenced otherwise.
func WithFence(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, fenceKey{}, l)
}

// FenceOf returns the lease ctx carries, if any.
func FenceOf(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(fenceKey{}).(Lease)
	return l, ok
}
