package bolt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/storetest"
)

// BenchmarkHistory is storetest.BenchHistory on a bbolt file (the same
// benchmark runs on PostgreSQL in store/postgres):
//
//	go test -run '^$' -bench History -benchtime 1s ./store/bolt/
func BenchmarkHistory(b *testing.B) {
	storetest.BenchHistory(b, func(b *testing.B, n int) store.Store {
		path := filepath.Join(b.TempDir(), "state.db")
		s, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		b.Cleanup(func() { _ = s.Close() })
		if err := s.LoadForBenchmark(n, 5000, func(i int) store.Sandbox { return storetest.BenchRecord(i, n) }); err != nil {
			b.Fatalf("load: %v", err)
		}
		if fi, err := os.Stat(path); err == nil {
			fmt.Printf("n=%d: file %.1f MB\n", n, float64(fi.Size())/1e6)
		}
		return s
	})
}
