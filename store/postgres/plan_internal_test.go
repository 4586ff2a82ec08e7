package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sandgate/internal/pgtest"
	"sandgate/store"
)

// A page reads what it returns: over a history of 20,000 records, each
// page query walks an index range of each state (or of the principal's or
// node's records in each state) and stops at its limit. A plan that
// filters a larger range (the pos-only index the first schema had, which
// made a live page of 100,000 records take 100 ms) or sorts one fails.
func TestPageQueriesWalkIndexRangesOnly(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.Database(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const n = 20_000
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	gen := func(i int) store.Sandbox {
		rec := store.Sandbox{ID: fmt.Sprintf("s%06d", i), Node: fmt.Sprintf("w%d", i%8), Principal: fmt.Sprintf("agent:a%d", i%10),
			State: store.StateEnded, CPUMHz: 100, MemoryMB: 128, CreatedAt: t0.Add(time.Duration(i) * time.Second),
			ExpiresAt: t0.Add(time.Hour), CeilingAt: t0.Add(time.Hour), EndedAt: t0.Add(2 * time.Hour)}
		if i >= n-n/10 { // the newest tenth live, as in a real history
			rec.State, rec.EndedAt = store.StateRunning, time.Time{}
		}
		return rec
	}
	if err := s.LoadForBenchmark(ctx, n, 5000, gen); err != nil {
		t.Fatal(err)
	}
	live := []store.State{store.StateStarting, store.StateRunning}
	for _, q := range []store.Query{
		{Limit: 100},
		{States: live, Limit: 10},
		{Principal: "agent:a4", Limit: 10},
		{Principal: "agent:a4", States: live, Limit: 1},
		{Node: "w3", States: []store.State{store.StateRunning}, Limit: 50},
	} {
		states, _ := store.QueryStates(q.States)
		sql, args := planFor(states, q.Principal, q.Node, nil).query([]byte{}, q.Limit+1)
		var lines []string
		rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		rows.Close()
		plan := strings.Join(lines, "\n")
		for _, bad := range []string{"Rows Removed by Filter", "Seq Scan", "Bitmap", "Sort Method"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%+v reads more than its page (%s):\n%s", q, bad, plan)
			}
		}
	}
}
