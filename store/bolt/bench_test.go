package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"sandgate/store"
	"sandgate/store/bolt"
)

// BenchmarkReserve measures one sandbox's store lifecycle: a Reserve with a
// budget check in admit, then an Update that ends it and releases the
// budget. Each is one fsynced bbolt write transaction.
func BenchmarkReserve(b *testing.B) {
	admit := func(f store.ReserveFacts) error {
		if f.Node.Sandboxes >= 1000 {
			return errors.New("node full")
		}
		return nil
	}
	end := func(r *store.Sandbox) error { r.State = store.StateEnded; return nil }
	var serial atomic.Int64
	cycle := func(s *bolt.Store) error {
		ctx := context.Background()
		rec := live(fmt.Sprintf("sbx-%08d", serial.Add(1)))
		if err := s.Reserve(ctx, rec, admit); err != nil {
			return err
		}
		_, err := s.Update(ctx, rec.ID, end)
		return err
	}

	b.Run("serial", func(b *testing.B) {
		s := openBench(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := cycle(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := openBench(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := cycle(s); err != nil {
					b.Error(err) // not Fatal: this is not the benchmark's goroutine
					return
				}
			}
		})
	})
}

func openBench(b *testing.B) *bolt.Store {
	b.Helper()
	s, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
