package gateway

import (
	"context"
	"sync"
	"time"

	"sandgate/nomad"
)

// allocatedCache keeps what Nomad reported the allocations on each node
// hold (Nomad.NodeAllocated) for a short time, so a burst of creates on one
// node lists its allocations once rather than once per create: the listing
// holds every allocation Nomad has not garbage-collected yet, so its cost
// grows with the node's churn. A figure up to ttl old is safe for B1: the
// sandboxes' share is also bounded by the gateway's own reservations (the
// larger of the two counts), and room another scheduler took within ttl
// makes Nomad refuse the placement, which the create answers with
// placement_failed and undoes. Freshness is wall-clock time, whatever
// Config.Now says: it is a matter of cost, not of policy.
type allocatedCache struct {
	nomad Nomad
	ttl   time.Duration // <= 0: every read goes to Nomad

	mu    sync.Mutex
	nodes map[string]allocatedEntry
}

type allocatedEntry struct {
	allocated nomad.Allocated
	at        time.Time
}

// get returns the node's allocated figures, read from Nomad unless a read
// of less than ttl ago is kept. An error is never kept.
func (c *allocatedCache) get(ctx context.Context, nodeID string) (nomad.Allocated, error) {
	if c.ttl > 0 {
		c.mu.Lock()
		e, ok := c.nodes[nodeID]
		c.mu.Unlock()
		if ok && time.Since(e.at) < c.ttl {
			return e.allocated, nil
		}
	}
	a, err := c.nomad.NodeAllocated(ctx, nodeID)
	if err != nil || c.ttl <= 0 {
		return a, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil {
		c.nodes = map[string]allocatedEntry{}
	}
	for id, e := range c.nodes { // forget nodes not read for a while
		if time.Since(e.at) > 100*c.ttl {
			delete(c.nodes, id)
		}
	}
	c.nodes[nodeID] = allocatedEntry{allocated: a, at: time.Now()}
	return a, nil
}
