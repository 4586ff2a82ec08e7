package postgres_test

import (
	"context"
	"testing"

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
