package storetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/store"
)

// BenchNow is the benchmarks' "now": every live record expires after it,
// every ended record ended before it.
var BenchNow = time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)

// specFiller pads a rendered job to about 3 KB, the size of a real one.
var specFiller = strings.Repeat(`{"Name":"env","Value":"PYTHONUNBUFFERED=1 LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin"},`, 32)

// benchID is the i-th of a sequence of gateway-shaped ids (16 characters
// of lowercase base32), scattered as random ones are.
func benchID(i int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	x := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019 //nolint:gosec // i >= 0
	var b [16]byte
	for j := range b {
		b[j] = alphabet[x&31]
		x = x>>5 | x<<59
	}
	return string(b[:])
}

// BenchRecord is the i-th of n records shaped like real ones: created 10s
// apart over 16 nodes and 10 agents, a few labels, a ~3 KB spec; the
// newest tenth live, the rest ended. So even at 100 records an agent has
// 10 records, one live, and there are 10 live records in all.
func BenchRecord(i, n int) store.Sandbox {
	id := benchID(i)
	created := BenchNow.Add(-time.Duration(n-i) * 10 * time.Second)
	r := store.Sandbox{
		ID: id, JobID: "sandgate-sbx-" + id,
		Node:      fmt.Sprintf("nomad-client-%02d", i%16),
		Principal: fmt.Sprintf("agent:agent-%02d", i%10),
		Profile:   "strict", Network: "egress", Image: "ghcr.io/example/sandbox-python:3.12",
		CPUMHz: 500, MemoryMB: 512,
		Labels: map[string]string{
			"team": []string{"infra", "ml", "web", "data"}[i%4], "ticket": fmt.Sprintf("T-%d", i%997), "purpose": "ci",
		},
		State: store.StateEnded, CreatedAt: created, UpdatedAt: created,
		ExpiresAt: created.Add(30 * time.Minute), CeilingAt: created.Add(4 * time.Hour),
		AllocID:  fmt.Sprintf("%08x-1f2e-4d3c-8b7a-%012x", i, i),
		TokenJTI: "jti-" + id,
		Spec:     fmt.Appendf(nil, `{"Job":{"ID":"sandgate-sbx-%s","Type":"batch","TaskGroups":[{"Tasks":[{"Env":[%s{}]}]}]}}`, id, specFiller),
	}
	if i >= n-n/10 {
		r.State = store.StateRunning
		r.ExpiresAt, r.CeilingAt = BenchNow.Add(30*time.Minute), BenchNow.Add(4*time.Hour)
		r.TokenDigest = fmt.Sprintf("%064x", i) // a SHA-256 in hex, one per session token
		return r
	}
	r.EndedAt, r.UpdatedAt, r.EndReason = created.Add(20*time.Minute), created.Add(20*time.Minute), "destroyed"
	return r
}

// historySizes are the history sizes the benchmark loads: 100, 10,000 and
// 100,000 records, or only 100 in the once-through run CI makes of every
// benchmark (-benchtime 1x, docs/benchmarks.md), where one sample says
// nothing about a size and 10,000 records take minutes to load under
// -race. Every sub-benchmark still runs.
func historySizes() []int {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return []int{100}
	}
	return []int{100, 10_000, 100_000}
}

// BenchHistory measures the reads a gateway makes on every list,
// reaper pass and scrape, and a create's Reserve, over histories of 100,
// 10,000 and 100,000 records (90 % ended). Each page is as full at 100
// records as at 100,000 (100 items for the operator's first page, 10 for
// the live and agent pages, 1 for an agent's live page), so with indexes
// every figure should stay near its 100-record one. List-live returns
// every live record (a tenth of the history here) and List-all, the
// unpaged read the gateway used to make everywhere, the whole history:
// both grow with it.
//
//	go test -run '^$' -bench History -benchtime 1s ./store/bolt/ ./store/postgres/
//
// (A count such as -benchtime 200x works too, but List-all then takes
// minutes at 100,000 records.)
//
// load returns a store holding the n records BenchRecord(i, n) makes,
// loaded by whatever fast path the implementation has; it is called once
// per size.
func BenchHistory(b *testing.B, load func(b *testing.B, n int) store.Store) {
	ctx := context.Background()
	live := []store.State{store.StateStarting, store.StateRunning}
	for _, n := range historySizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			start := time.Now()
			s := load(b, n)
			// Printed, not logged: a parent benchmark's log is not shown.
			fmt.Printf("n=%d: loaded in %s\n", n, time.Since(start).Round(time.Millisecond))
			agent := "agent:agent-04"
			page := func(q store.Query, want int) func(*testing.B) {
				return func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						p, err := s.ListPage(ctx, q)
						if err != nil || len(p.Items) != want {
							b.Fatalf("ListPage(%+v) = %d items, %v; want %d", q, len(p.Items), err, want)
						}
					}
				}
			}
			b.Run("ListPage-operator", page(store.Query{Limit: 100}, 100))
			b.Run("ListPage-operator-live", page(store.Query{States: live, Limit: 10}, 10))
			b.Run("ListPage-agent", page(store.Query{Principal: agent, Limit: 10}, 10))
			b.Run("ListPage-agent-live", page(store.Query{Principal: agent, States: live, Limit: 1}, 1))
			b.Run("Due-none", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if due, err := s.Due(ctx, BenchNow); err != nil || len(due) != 0 {
						b.Fatalf("Due = %d, %v; want none", len(due), err)
					}
				}
			})
			b.Run("Counts", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if c, err := s.Counts(ctx); err != nil || c[store.StateEnded] != int64(n-n/10) {
						b.Fatalf("Counts = %v, %v", c, err)
					}
				}
			})
			b.Run("List-live", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if recs, err := s.List(ctx, store.Filter{LiveOnly: true}); err != nil || len(recs) != n/10 {
						b.Fatalf("List(live) = %d, %v", len(recs), err)
					}
				}
			})
			b.Run("List-all", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if recs, err := s.List(ctx, store.Filter{}); err != nil || len(recs) < n {
						b.Fatalf("List = %d, %v", len(recs), err)
					}
				}
			})
			var serial atomic.Int64
			errFull := errors.New("node full")
			b.Run("Reserve", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					rec := BenchRecord(n+int(serial.Add(1)), n)
					rec.State, rec.CreatedAt = store.StateStarting, time.Time{}
					rec.ExpiresAt, rec.CeilingAt = BenchNow.Add(time.Hour), BenchNow.Add(4*time.Hour)
					err := s.Reserve(ctx, rec, func(f store.ReserveFacts) error {
						if f.Node.Sandboxes >= 1_000_000 || f.Principal.Sandboxes >= 1_000_000 {
							return errFull
						}
						return nil
					})
					if err != nil {
						b.Fatalf("Reserve: %v", err)
					}
				}
			})
		})
	}
}
