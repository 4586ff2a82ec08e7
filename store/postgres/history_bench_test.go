package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/postgres"
	"sandgate/store/storetest"
)

// BenchmarkHistory is storetest.BenchHistory on a PostgreSQL database of
// the test server (the same benchmark runs on bbolt in store/bolt):
//
//	go run ./test/pgrun -- go test -run '^$' -bench History -benchtime 1s ./store/postgres/
func BenchmarkHistory(b *testing.B) {
	storetest.BenchHistory(b, func(b *testing.B, n int) store.Store {
		ctx := context.Background()
		s, err := postgres.Open(ctx, pgtest.Database(b), postgres.Options{})
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		b.Cleanup(func() { _ = s.Close() })
		if err := s.LoadForBenchmark(ctx, n, 5000, func(i int) store.Sandbox { return storetest.BenchRecord(i, n) }); err != nil {
			b.Fatalf("load: %v", err)
		}
		var size int64
		if err := s.QueryRowForBenchmark(ctx, `SELECT pg_database_size(current_database())`, &size); err == nil {
			fmt.Printf("n=%d: database %.1f MB\n", n, float64(size)/1e6)
		}
		return s
	})
}
