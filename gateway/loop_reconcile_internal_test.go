package gateway

import (
	"context"
	"testing"
	"time"

	"sandgate/store"
)

// oneLeaser stands for a store that several replicas share.
type oneLeaser struct{}

func (oneLeaser) AcquireLease(context.Context, string, string, time.Duration) (store.Lease, error) {
	return store.Lease{}, nil
}

func (oneLeaser) ReleaseLease(context.Context, string, string) error { return nil }

// A starting record on a shared store is another replica's create in
// flight only while it is young and another replica reserved it: one this
// process reserved (its create has answered, or its inflight mark would
// hold it) or an earlier process of this replica (which died) is
// reconciled at once.
func TestAStartingRecordIsAnotherReplicasOnlyWhenAnotherReservedIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	s := &Server{
		lease: &backgroundLease{leaser: oneLeaser{}, replica: "gw-a", holder: "gw-a#0001"},
		cfg:   Config{StartTimeout: time.Minute, Now: func() time.Time { return now }},
	}
	young, old := now.Add(-10*time.Second), now.Add(-2*time.Minute)
	for _, c := range []struct {
		name    string
		rec     store.Sandbox
		another bool
	}{
		{"another replica's, young", store.Sandbox{State: store.StateStarting, Creator: "gw-b#0002", CreatedAt: young}, true},
		{"another replica's, past start_timeout", store.Sandbox{State: store.StateStarting, Creator: "gw-b#0002", CreatedAt: old}, false},
		{"this process's", store.Sandbox{State: store.StateStarting, Creator: "gw-a#0001", CreatedAt: young}, false},
		{"an earlier process of this replica", store.Sandbox{State: store.StateStarting, Creator: "gw-a#0000", CreatedAt: young}, false},
		{"a replica whose name begins like this one's", store.Sandbox{State: store.StateStarting, Creator: "gw-a2#0003", CreatedAt: young}, true},
		{"no creator (moved from bbolt), young", store.Sandbox{State: store.StateStarting, CreatedAt: young}, true},
		{"running", store.Sandbox{State: store.StateRunning, Creator: "gw-b#0002", CreatedAt: young}, false},
	} {
		if got := s.creatingElsewhere(c.rec); got != c.another {
			t.Errorf("%s: creatingElsewhere = %v, want %v", c.name, got, c.another)
		}
	}
	s.lease.leaser = nil // a store of its own: nothing is another's
	if s.creatingElsewhere(store.Sandbox{State: store.StateStarting, Creator: "gw-b#0002", CreatedAt: young}) {
		t.Error("on a store of its own, a record was taken for another replica's")
	}
}
