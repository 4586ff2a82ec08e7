package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/postgres"
	"sandgate/store/storetest"
)

// open returns a store on a new, empty database of the shared test server.
func open(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.Database(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

// TestConformanceAcrossReplicas runs the suite with every call handed to
// the next of three stores on one database, as three gateways would make
// them: racing reservations of a node's last slot or of one idempotency
// key arrive through different connections pools.
func TestConformanceAcrossReplicas(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		dsn := pgtest.Database(t)
		var replicas []store.Store
		for range 3 {
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			replicas = append(replicas, s)
		}
		s := storetest.Spread(replicas...)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestDecisionLogConformance(t *testing.T) {
	storetest.RunDecisionLog(t, func(t *testing.T) store.DecisionLog { return open(t) })
}

// TestTheDecisionLogHasAPoolOfItsOwn reserves, from more goroutines than
// the pool has connections, sandboxes on one node whose admit writes a
// decision, as the gateway's admission does while the budget rows are
// locked. Sharing the records' pool, the reservations waiting on those
// rows would hold every connection, the holder could not write its
// decision, and all would fail at the statement timeout.
func TestTheDecisionLogHasAPoolOfItsOwn(t *testing.T) {
	const conns, at = 2, 8
	s, err := postgres.Open(context.Background(), pgtest.Database(t), postgres.Options{MaxConns: conns, StatementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	errs := make(chan error, at)
	var wg sync.WaitGroup
	for i := range at {
		wg.Go(func() {
			rec := storetest.BenchRecord(100+i, 101+i)
			rec.Node, rec.Principal = "node-1", "agent:one"
			errs <- s.Reserve(ctx, rec, func(store.ReserveFacts) error {
				return s.AppendDecisions(ctx, []store.Decision{{ID: fmt.Sprintf("d-%d", i), Time: time.Now(), Line: []byte("{}")}})
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Decisions(ctx, store.DecisionQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != at {
		t.Fatalf("%d decisions stored, want %d", len(got), at)
	}
}
