package gateway

import (
	"context"
	"sync"
	"time"

	"sandgate/nomad"
)

// allocatedCache keeps what Nomad reported the allocations on each node
// hold (Nomad.NodeAllocated) for a short time, and shares one listing among
// the creates that ask while it runs, so a burst of creates lists a
// node's allocations once rather than once each (host views and
// enrollment always read afresh): the listing holds
// every allocation Nomad has not garbage-collected yet, so its cost grows
// with the node's churn. A figure up to ttl old is safe for B1: the
// sandboxes' share is also bounded by the gateway's own reservations (the
// larger of the two counts), and room another scheduler took meanwhile
// makes Nomad refuse the placement, which the create answers with
// placement_failed and undoes. Freshness is wall-clock time, whatever
// Config.Now says: it is a matter of cost, not of policy.
type allocatedCache struct {
	nomad Nomad
	ttl   time.Duration // <= 0: every read goes to Nomad, none is shared

	mu      sync.Mutex
	nodes   map[string]allocatedEntry
	flights map[string]*allocatedFlight
}

type allocatedEntry struct {
	allocated nomad.Allocated
	at        time.Time // when the listing that gave it started
}

// allocatedFlight is one listing in progress; done is closed once its
// fields are set.
type allocatedFlight struct {
	done      chan struct{}
	allocated nomad.Allocated
	err       error
}

// get returns the node's allocated figures: a listing started less than
// ttl ago, the one in progress, or a new one. An error is never kept.
func (c *allocatedCache) get(ctx context.Context, nodeID string) (nomad.Allocated, error) {
	if c.ttl <= 0 {
		return c.nomad.NodeAllocated(ctx, nodeID)
	}
	c.mu.Lock()
	if e, ok := c.nodes[nodeID]; ok && time.Since(e.at) < c.ttl {
		c.mu.Unlock()
		return e.allocated, nil
	}
	if f, ok := c.flights[nodeID]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.allocated, f.err
		case <-ctx.Done():
			return nomad.Allocated{}, ctx.Err()
		}
	}
	if c.nodes == nil {
		c.nodes, c.flights = map[string]allocatedEntry{}, map[string]*allocatedFlight{}
	}
	f := &allocatedFlight{done: make(chan struct{})}
	c.flights[nodeID] = f
	c.mu.Unlock()

	started := time.Now()
	// The listing is not the first caller's alone: it ends on its own
	// deadline (the Nomad client's timeout), not when that caller goes.
	f.allocated, f.err = c.nomad.NodeAllocated(context.WithoutCancel(ctx), nodeID)
	c.mu.Lock()
	delete(c.flights, nodeID)
	if f.err == nil {
		for id, e := range c.nodes { // forget nodes not read for a while
			if time.Since(e.at) > 100*c.ttl {
				delete(c.nodes, id)
			}
		}
		c.nodes[nodeID] = allocatedEntry{allocated: f.allocated, at: started}
	}
	c.mu.Unlock()
	close(f.done)
	return f.allocated, f.err
}
