package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"sandgate/store"
)

// oneLeaser stands for a store that several replicas share; present
// names the processes holding their presence, err fails LeaseHeld.
type oneLeaser struct {
	present map[string]string // presence lease name -> holder
	err     error
}

func (oneLeaser) AcquireLease(context.Context, string, string, time.Duration) (store.Lease, error) {
	return store.Lease{}, nil
}

func (oneLeaser) ReleaseLease(context.Context, string, string) error { return nil }

func (l oneLeaser) LeaseHeld(_ context.Context, name, holder string) (bool, error) {
	return l.present[name] == holder, l.err
}

// A starting record on a shared store is another replica's create in
// flight while it is young and another replica reserved it, and after
// StartTimeout while that replica's process is still present (its create
// may wait longer, or run slowly on a loaded machine: it settles the
// record itself). One this process reserved (its create has answered, or
// its inflight mark would hold it), an earlier process of this replica
// (which died) or an old record of a replica no longer present is
// reconciled.
func TestAStartingRecordIsAnotherReplicasOnlyWhenAnotherReservedIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	leaser := oneLeaser{present: map[string]string{"replica/gw-b": "gw-b#0002", "replica/gw-c": "gw-c#0009"}}
	s := &Server{
		lease: &backgroundLease{leaser: leaser, replica: "gw-a", holder: "gw-a#0001"},
		cfg:   Config{StartTimeout: time.Minute, Now: func() time.Time { return now }},
	}
	young, old := now.Add(-10*time.Second), now.Add(-2*time.Minute)
	for _, c := range []struct {
		name    string
		rec     store.Sandbox
		another bool
	}{
		{"another replica's, young", store.Sandbox{State: store.StateStarting, Creator: "gw-b#0002", CreatedAt: young}, true},
		{"another replica's, past start_timeout, its process present", store.Sandbox{State: store.StateStarting, Creator: "gw-b#0002", CreatedAt: old}, true},
		{"another replica's, past start_timeout, a later process of it present", store.Sandbox{State: store.StateStarting, Creator: "gw-c#0008", CreatedAt: old}, false},
		{"another replica's, past start_timeout, not present", store.Sandbox{State: store.StateStarting, Creator: "gw-d#0004", CreatedAt: old}, false},
		{"this process's", store.Sandbox{State: store.StateStarting, Creator: "gw-a#0001", CreatedAt: young}, false},
		{"an earlier process of this replica", store.Sandbox{State: store.StateStarting, Creator: "gw-a#0000", CreatedAt: young}, false},
		{"a replica whose name begins like this one's", store.Sandbox{State: store.StateStarting, Creator: "gw-a2#0003", CreatedAt: young}, true},
		{"no creator (moved from bbolt), young", store.Sandbox{State: store.StateStarting, CreatedAt: young}, true},
		{"no creator (moved from bbolt), past start_timeout", store.Sandbox{State: store.StateStarting, CreatedAt: old}, false},
		{"running", store.Sandbox{State: store.StateRunning, Creator: "gw-b#0002", CreatedAt: young}, false},
	} {
		got, err := s.creatingElsewhere(ctx, c.rec)
		if err != nil || got != c.another {
			t.Errorf("%s: creatingElsewhere = %v, %v; want %v", c.name, got, err, c.another)
		}
	}
	// The presence cannot be read: the record is left alone, and the
	// pass says why.
	s.lease.leaser = oneLeaser{err: errors.New("the database is down")}
	if got, err := s.creatingElsewhere(ctx, store.Sandbox{State: store.StateStarting, Creator: "gw-d#0004", CreatedAt: old}); !got || err == nil {
		t.Errorf("presence unreadable: creatingElsewhere = %v, %v; want true and the error", got, err)
	}
	s.lease.leaser = nil // a store of its own: nothing is another's
	if got, err := s.creatingElsewhere(ctx, store.Sandbox{State: store.StateStarting, Creator: "gw-b#0002", CreatedAt: young}); got || err != nil {
		t.Errorf("on a store of its own, a record was taken for another replica's: %v %v", got, err)
	}
}
