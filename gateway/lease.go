package gateway

import (
	"context"
	"strings"
	"sync"
	"time"

	"sandgate/store"
)

// backgroundLeaseName is the lease whose holder runs the background loops
// (reaper, reconcile, usage and disk monitor).
const backgroundLeaseName = "background"

// backgroundLease decides whether this replica runs the background loops.
// On a store that several gateways share (a store.Leaser) the replicas
// elect one holder through the store: the holder renews its lease every
// quarter of its ttl, the others try to take it as often, so when the
// holder dies or loses the database another takes over within 1.25 ttl.
// On a store of its own a gateway always holds the lease.
//
// A replica trusts its lease until ttl after it last asked for it (its
// own clock, measured from before the call): past that, without a
// renewal, it stops acting even while the database is unreachable. Every
// store write of a background pass also carries the lease (store.WithFence)
// and is refused once another replica has taken it, so a replica whose
// belief is stale cannot change a record.
type backgroundLease struct {
	leaser  store.Leaser // nil: the store serves this gateway alone
	replica string
	// holder is this process's name in the lease: the replica's name and
	// an instance id of its own, so two processes that were given one
	// name (a copied config, a container's pid 1 on one host), or a
	// replica restarted before its old lease expired, are never both
	// its holder.
	holder string
	ttl    time.Duration
	now    func() time.Time

	mu         sync.Mutex
	lease      store.Lease // as last seen: held by this replica or another
	validUntil time.Time   // this replica's own lease is trusted until then
	lastErr    error
}

// Presence: on a shared store every replica process also holds a lease
// of its own name, "replica/" and the name, for presenceTTL, renewed every
// quarter of it by a goroutine of its own (keepPresent), so a pass that
// blocks the loops does not end it. The holder of the background lease
// reads it (alive) to tell a create still in flight on a live replica,
// which that replica settles, from a starting record its replica left
// behind when it died, which reconcile settles or ends. A second process
// given a name already in use is never present: its records are judged
// as a dead replica's, after StartTimeout.
const presencePrefix = "replica/"

// presenceTTL is how long a replica's presence lasts without renewal:
// several background lease ttls, and never under 10 s, so a replica
// slowed by load is not mistaken for a dead one.
func presenceTTL(leaseTTL time.Duration) time.Duration {
	return max(4*leaseTTL, 10*time.Second)
}

func newBackgroundLease(st store.Store, replica string, ttl time.Duration, now func() time.Time) *backgroundLease {
	b := &backgroundLease{replica: replica, holder: replica + "#" + randomHex(4), ttl: ttl, now: now}
	if l, ok := st.(store.Leaser); ok {
		b.leaser = l
	}
	return b
}

// shared reports whether replicas elect a holder (false: this gateway
// alone does the background work).
func (b *backgroundLease) shared() bool { return b.leaser != nil }

// refresh takes or renews the lease and reports whether this replica
// holds it now, and whether it has just taken it (it did not before).
func (b *backgroundLease) refresh(ctx context.Context) (held, taken bool) {
	if b.leaser == nil {
		return true, false
	}
	asked := b.now()
	l, err := b.leaser.AcquireLease(ctx, backgroundLeaseName, b.holder, b.ttl)
	b.mu.Lock()
	defer b.mu.Unlock()
	before := b.heldLocked(asked)
	b.lastErr = err
	if err == nil {
		b.lease = l
		if l.Holder == b.holder {
			b.validUntil = asked.Add(b.ttl)
		} else {
			b.validUntil = time.Time{}
		}
	}
	held = b.heldLocked(b.now())
	return held, held && !before
}

func (b *backgroundLease) heldLocked(at time.Time) bool {
	return b.lease.Holder == b.holder && at.Before(b.validUntil)
}

// fence returns ctx carrying this replica's lease, and whether it holds
// one: a background pass runs only with ok, and with the returned ctx.
func (b *backgroundLease) fence(ctx context.Context) (context.Context, bool) {
	if b.leaser == nil {
		return ctx, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.heldLocked(b.now()) {
		return ctx, false
	}
	return store.WithFence(ctx, b.lease), true
}

// release gives the lease and the presence up (at shutdown), so another
// replica takes the lease at its next try instead of after the ttl, and
// settles this replica's starting records once StartTimeout has passed.
func (b *backgroundLease) release(ctx context.Context) error {
	if b.leaser == nil {
		return nil
	}
	b.mu.Lock()
	b.validUntil = time.Time{}
	b.mu.Unlock()
	err := b.leaser.ReleaseLease(ctx, backgroundLeaseName, b.holder)
	if perr := b.leaser.ReleaseLease(ctx, presencePrefix+b.replica, b.holder); err == nil {
		err = perr
	}
	return err
}

// present takes or renews this process's presence and returns the
// presence lease as it stands (Holder is another process when one of
// the same name is alive).
func (b *backgroundLease) present(ctx context.Context) (store.Lease, error) {
	return b.leaser.AcquireLease(ctx, presencePrefix+b.replica, b.holder, presenceTTL(b.ttl))
}

// alive reports whether creator (a record's Creator: a replica's name,
// "#" and its process's instance id) is a process that holds its
// presence now.
func (b *backgroundLease) alive(ctx context.Context, creator string) (bool, error) {
	name, _, ok := strings.Cut(creator, "#")
	if b.leaser == nil || !ok || name == "" {
		return false, nil
	}
	return b.leaser.LeaseHeld(ctx, presencePrefix+name, creator)
}

// leaseStatus is what /readyz and the metrics say of the lease.
type leaseStatus struct {
	Replica string `json:"replica"`
	// Holder is the replica that runs the background loops, as last
	// seen: its name, "#" and the instance id of its process; "" before
	// the first election.
	Holder string `json:"holder"`
	// Held: this replica holds the lease now.
	Held  bool  `json:"held"`
	Epoch int64 `json:"epoch,omitempty"`
	// Shared: the replicas of one store elect the holder; false for a
	// gateway with a store of its own.
	Shared bool `json:"shared"`
}

func (b *backgroundLease) status() leaseStatus {
	if b.leaser == nil {
		return leaseStatus{Replica: b.replica, Holder: b.holder, Held: true}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return leaseStatus{Replica: b.replica, Holder: b.lease.Holder, Held: b.heldLocked(b.now()), Epoch: b.lease.Epoch, Shared: true}
}
