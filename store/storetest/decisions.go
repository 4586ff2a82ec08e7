package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"sandgate/store"
)

// RunDecisionLog is the conformance suite of a store.DecisionLog (a store
// several gateways share). open must return a new, empty log on every
// call; sub-tests run in parallel, each on its own.
func RunDecisionLog(t *testing.T, open func(t *testing.T) store.DecisionLog) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, store.DecisionLog)
	}{
		{"PagesNewestFirstWithoutSkipOrRepeat", testDecisionPages},
		{"PagesOldestFirst", testDecisionPagesOldest},
		{"Filters", testDecisionFilters},
		{"ARetriedAppendStoresNothingTwice", testDecisionRetry},
		{"AnAppendIsAllOrNothing", testDecisionAtomic},
		{"RacingAppendsLoseNothing", testDecisionRace},
		{"PruneDeletesOnlyTheOldest", testDecisionPrune},
		{"BadLimitsAreInvalid", testDecisionLimits},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open(t))
		})
	}
}

// decision is a decision taken at base+sec seconds (plus nanos).
func decision(id string, sec int, nanos int, allow bool, principal, entrypoint string, rules ...string) store.Decision {
	at := base.Add(time.Duration(sec)*time.Second + time.Duration(nanos))
	return store.Decision{
		ID: id, Time: at, Allow: allow, Principal: principal, Entrypoint: entrypoint, Rules: rules,
		Line: fmt.Appendf(nil, `{"decision_id":%q,"time":%q}`, id, at.Format(time.RFC3339Nano)),
	}
}

func decisionIDs(ds []store.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func appendAll(t *testing.T, l store.DecisionLog, ds ...store.Decision) {
	t.Helper()
	if err := l.AppendDecisions(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
}

// walk reads every page of q, limit at a time, following the last
// decision of each page.
func walk(t *testing.T, l store.DecisionLog, q store.DecisionQuery) []string {
	t.Helper()
	var out []string
	for range 100 {
		page, err := l.Decisions(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decisionIDs(page)...)
		if len(page) < q.Limit {
			return out
		}
		last := page[len(page)-1]
		q.After = store.DecisionPosition{Time: last.Time, ID: last.ID}
	}
	t.Fatal("a walk of the pages did not end")
	return nil
}

// Several decisions of one instant (to the nanosecond) are ordered by id,
// and a page boundary among them neither skips nor repeats one.
func testDecisionPages(t *testing.T, l store.DecisionLog) {
	appendAll(t, l,
		decision("d-c", 1, 0, true, "agent:a", "authz"),
		decision("d-a", 2, 5, true, "agent:a", "authz"),
		decision("d-b", 2, 5, false, "agent:b", "admission", "B1"),
		decision("d-e", 2, 5, true, "agent:a", "authz"),
		decision("d-d", 3, 1, true, "agent:a", "authz"),
	)
	want := []string{"d-d", "d-e", "d-b", "d-a", "d-c"}
	for _, limit := range []int{1, 2, 3, 5, 10} {
		if got := walk(t, l, store.DecisionQuery{Limit: limit}); !slices.Equal(got, want) {
			t.Errorf("pages of %d: %v, want %v", limit, got, want)
		}
	}
	page, err := l.Decisions(context.Background(), store.DecisionQuery{Limit: 1})
	if err != nil || len(page) != 1 {
		t.Fatal(page, err)
	}
	d := page[0]
	if !d.Time.Equal(base.Add(3*time.Second+1)) || d.Principal != "agent:a" || d.Entrypoint != "authz" || !d.Allow ||
		string(d.Line) != string(decision("d-d", 3, 1, true, "", "").Line) {
		t.Errorf("the stored decision reads back as %+v (%s)", d, d.Line)
	}
}

func testDecisionPagesOldest(t *testing.T, l store.DecisionLog) {
	for i := range 7 {
		appendAll(t, l, decision(fmt.Sprintf("d-%d", i), i/2, 0, true, "agent:a", "authz"))
	}
	want := []string{"d-0", "d-1", "d-2", "d-3", "d-4", "d-5", "d-6"}
	for _, limit := range []int{1, 3, 7} {
		if got := walk(t, l, store.DecisionQuery{Limit: limit, Oldest: true}); !slices.Equal(got, want) {
			t.Errorf("oldest first, pages of %d: %v, want %v", limit, got, want)
		}
	}
}

func testDecisionFilters(t *testing.T, l store.DecisionLog) {
	appendAll(t, l,
		decision("d1", 1, 0, true, "agent:a", "authz"),
		decision("d2", 2, 0, false, "agent:a", "authz", "T2"),
		decision("d3", 3, 0, false, "agent:b", "admission", "B1", "H5"),
		decision("d4", 4, 0, true, "operator:o", "lifecycle"),
		decision("d5", 5, 0, false, "agent:\x00odd", "admission", "H5"),
	)
	no, yes := false, true
	for _, c := range []struct {
		name string
		q    store.DecisionQuery
		want []string
	}{
		{"the refusals", store.DecisionQuery{Allow: &no}, []string{"d5", "d3", "d2"}},
		{"the allowed", store.DecisionQuery{Allow: &yes}, []string{"d4", "d1"}},
		{"one principal", store.DecisionQuery{Principal: "agent:a"}, []string{"d2", "d1"}},
		{"a principal with a NUL byte", store.DecisionQuery{Principal: "agent:\x00odd"}, []string{"d5"}},
		{"one entrypoint", store.DecisionQuery{Entrypoint: "admission"}, []string{"d5", "d3"}},
		{"one rule", store.DecisionQuery{Rule: "H5"}, []string{"d5", "d3"}},
		{"a rule no decision names", store.DecisionQuery{Rule: "P1"}, []string{}},
		{"since is inclusive, until exclusive", store.DecisionQuery{Since: base.Add(2 * time.Second), Until: base.Add(4 * time.Second)}, []string{"d3", "d2"}},
		{"every filter at once", store.DecisionQuery{Allow: &no, Principal: "agent:b", Entrypoint: "admission", Rule: "B1", Since: base}, []string{"d3"}},
	} {
		c.q.Limit = 10
		got, err := l.Decisions(context.Background(), c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if g := decisionIDs(got); !slices.Equal(g, c.want) {
			t.Errorf("%s: %v, want %v", c.name, g, c.want)
		}
	}
}

func testDecisionRetry(t *testing.T, l store.DecisionLog) {
	d := decision("d1", 1, 0, true, "agent:a", "authz")
	appendAll(t, l, d)
	again := d
	again.Line = []byte(`{"decision_id":"d1","changed":true}`)
	appendAll(t, l, again, decision("d2", 2, 0, true, "agent:a", "authz"))
	got, err := l.Decisions(context.Background(), store.DecisionQuery{Limit: 10, Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(decisionIDs(got), []string{"d1", "d2"}) || string(got[0].Line) != string(d.Line) {
		t.Fatalf("after a retried append: %v, the first line %s; want d1 once, as first stored, then d2", decisionIDs(got), got[0].Line)
	}
}

func testDecisionAtomic(t *testing.T, l store.DecisionLog) {
	bad := decision("", 2, 0, true, "agent:a", "authz")
	err := l.AppendDecisions(context.Background(), []store.Decision{decision("d1", 1, 0, true, "agent:a", "authz"), bad})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an append with a decision without an id: %v, want ErrInvalid", err)
	}
	got, err := l.Decisions(context.Background(), store.DecisionQuery{Limit: 10})
	if err != nil || len(got) != 0 {
		t.Fatalf("a refused append left %v (%v)", decisionIDs(got), err)
	}
}

func testDecisionRace(t *testing.T, l store.DecisionLog) {
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// Writers share instants: the order falls back on the id.
				d := decision(fmt.Sprintf("w%d-%02d", w, i), i, 0, i%2 == 0, fmt.Sprintf("agent:%d", w), "authz")
				if err := l.AppendDecisions(context.Background(), []store.Decision{d}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := walk(t, l, store.DecisionQuery{Limit: 7})
	if len(got) != writers*each {
		t.Fatalf("%d decisions read back, want %d", len(got), writers*each)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("%s read twice", id)
		}
		seen[id] = true
	}
}

func testDecisionPrune(t *testing.T, l store.DecisionLog) {
	for i := range 10 {
		appendAll(t, l, decision(fmt.Sprintf("d%d", i), i, 0, true, "agent:a", "authz"))
	}
	ctx := context.Background()
	n, err := l.PruneDecisions(ctx, base.Add(6*time.Second), 4)
	if err != nil || n != 4 {
		t.Fatalf("prune at most 4 of the 6 before 6s: %d, %v", n, err)
	}
	n, err = l.PruneDecisions(ctx, base.Add(6*time.Second), 4)
	if err != nil || n != 2 {
		t.Fatalf("prune the 2 left before 6s: %d, %v", n, err)
	}
	got, err := l.Decisions(ctx, store.DecisionQuery{Limit: 20, Oldest: true})
	if err != nil || !slices.Equal(decisionIDs(got), []string{"d6", "d7", "d8", "d9"}) {
		t.Fatalf("after pruning before 6s: %v (%v)", decisionIDs(got), err)
	}
}

func testDecisionLimits(t *testing.T, l store.DecisionLog) {
	ctx := context.Background()
	for _, limit := range []int{0, -1, store.MaxDecisionQuery + 1} {
		if _, err := l.Decisions(ctx, store.DecisionQuery{Limit: limit}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("limit %d: %v, want ErrInvalid", limit, err)
		}
	}
	if _, err := l.PruneDecisions(ctx, base, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("prune limit 0: %v, want ErrInvalid", err)
	}
}
