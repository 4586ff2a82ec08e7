// Package maintain is offline upkeep of a store, run by `sandgate store`
// while no gateway writes to it: moving every record, node and token of
// one store into another (bbolt to PostgreSQL when one gateway becomes
// several), and checking that a store's derived figures (budget use per
// node and principal, counts per state) agree with its records.
package maintain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"sandgate/store"
)

// Versioned is a store that can say its schema version: the one it holds
// and the newest this build knows.
type Versioned interface {
	SchemaVersions(ctx context.Context) (have, known int, err error)
}

// Inventory is what a store holds, as Move and Check count it.
type Inventory struct {
	States map[store.State]int64 `json:"states"`
	Nodes  int                   `json:"nodes"`
	Tokens int                   `json:"tokens"`
	// Live is the use of the live records per node.
	Live map[string]store.Usage `json:"live_by_node"`
}

// Records is the number of sandbox records.
func (i Inventory) Records() int64 {
	var n int64
	for _, c := range i.States {
		n += c
	}
	return n
}

// ErrNotEmpty refuses a move into a store that already holds anything.
var ErrNotEmpty = errors.New("maintain: the target store is not empty")

// Move copies every sandbox record (with its spec and idempotency key),
// node record and token record of from into to, which must be empty, and
// then checks that to holds what from held: the records per state, the
// nodes, the tokens and the live use per node. The records go in one
// Import (one transaction); nodes and tokens follow. from should belong
// to a stopped gateway, so nothing changes while it is read.
func Move(ctx context.Context, from store.Store, to store.Importer) (Inventory, error) {
	if inv, err := take(ctx, to); err != nil {
		return Inventory{}, fmt.Errorf("maintain: reading the target: %w", err)
	} else if inv.Records() != 0 || inv.Nodes != 0 || inv.Tokens != 0 {
		return Inventory{}, fmt.Errorf("%w: it holds %d records, %d nodes and %d tokens; move into a new database",
			ErrNotEmpty, inv.Records(), inv.Nodes, inv.Tokens)
	}
	want, err := take(ctx, from)
	if err != nil {
		return Inventory{}, fmt.Errorf("maintain: reading the source: %w", err)
	}
	recs, err := from.List(ctx, store.Filter{})
	if err != nil {
		return Inventory{}, fmt.Errorf("maintain: reading the source: %w", err)
	}
	for i := range recs {
		if recs[i].Spec, err = from.Spec(ctx, recs[i].ID); err != nil {
			return Inventory{}, fmt.Errorf("maintain: reading the spec of %s: %w", recs[i].ID, err)
		}
	}
	if err := to.Import(ctx, recs); err != nil {
		return Inventory{}, fmt.Errorf("maintain: %w", err)
	}
	nodes, err := from.ListNodes(ctx)
	if err != nil {
		return Inventory{}, fmt.Errorf("maintain: reading the source's nodes: %w", err)
	}
	for _, n := range nodes {
		if err := to.PutNode(ctx, n); err != nil {
			return Inventory{}, fmt.Errorf("maintain: %w", err)
		}
	}
	tokens, err := from.ListTokens(ctx)
	if err != nil {
		return Inventory{}, fmt.Errorf("maintain: reading the source's tokens: %w", err)
	}
	for _, t := range tokens {
		if err := to.PutToken(ctx, t); err != nil {
			return Inventory{}, fmt.Errorf("maintain: %w", err)
		}
	}
	got, err := take(ctx, to)
	if err != nil {
		return Inventory{}, fmt.Errorf("maintain: reading the target back: %w", err)
	}
	if diff := compare(want, got); diff != nil {
		return got, fmt.Errorf("maintain: the target does not hold what the source held: %v", diff)
	}
	return got, nil
}

// take counts what s holds.
func take(ctx context.Context, s store.Store) (Inventory, error) {
	inv := Inventory{Live: map[string]store.Usage{}}
	var err error
	if inv.States, err = s.Counts(ctx); err != nil {
		return Inventory{}, err
	}
	nodes, err := s.ListNodes(ctx)
	if err != nil {
		return Inventory{}, err
	}
	tokens, err := s.ListTokens(ctx)
	if err != nil {
		return Inventory{}, err
	}
	inv.Nodes, inv.Tokens = len(nodes), len(tokens)
	live, err := s.List(ctx, store.Filter{LiveOnly: true})
	if err != nil {
		return Inventory{}, err
	}
	for _, r := range live {
		if _, ok := inv.Live[r.Node]; !ok {
			if inv.Live[r.Node], err = s.NodeUsage(ctx, r.Node); err != nil {
				return Inventory{}, err
			}
		}
	}
	return inv, nil
}

// compare lists how got differs from want.
func compare(want, got Inventory) []string {
	var diff []string
	for _, st := range store.States() {
		if want.States[st] != got.States[st] {
			diff = append(diff, fmt.Sprintf("%s records: %d, want %d", st, got.States[st], want.States[st]))
		}
	}
	if want.Nodes != got.Nodes {
		diff = append(diff, fmt.Sprintf("nodes: %d, want %d", got.Nodes, want.Nodes))
	}
	if want.Tokens != got.Tokens {
		diff = append(diff, fmt.Sprintf("tokens: %d, want %d", got.Tokens, want.Tokens))
	}
	for _, n := range slices.Sorted(maps.Keys(want.Live)) {
		if want.Live[n] != got.Live[n] {
			diff = append(diff, fmt.Sprintf("live use on %s: %+v, want %+v", n, got.Live[n], want.Live[n]))
		}
	}
	return diff
}

// Report is Check's answer.
type Report struct {
	// Schema is the store's schema version and the newest this build
	// knows; zero when the store cannot say.
	Schema      int `json:"schema"`
	SchemaKnown int `json:"schema_known"`
	Inventory
	// Problems lists every disagreement between the derived figures and
	// the records; empty for a consistent store.
	Problems []string `json:"problems"`
}

// errProbe is what Check's admit returns to read a principal's use
// without writing.
var errProbe = errors.New("maintain: probe")

// Check reads every record and compares the store's derived figures with
// them: the count of each state, and the budget use of every node and
// principal with the sum over their live records (a principal's use is
// read as Reserve's admit sees it, through a reservation that admit
// refuses, so nothing is written). It changes nothing.
func Check(ctx context.Context, s store.Store) (Report, error) {
	var r Report
	if v, ok := s.(Versioned); ok {
		var err error
		if r.Schema, r.SchemaKnown, err = v.SchemaVersions(ctx); err != nil {
			return Report{}, fmt.Errorf("maintain: check: %w", err)
		}
	}
	inv, err := take(ctx, s)
	if err != nil {
		return Report{}, fmt.Errorf("maintain: check: %w", err)
	}
	r.Inventory = inv
	r.Problems = []string{}
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		return Report{}, fmt.Errorf("maintain: check: %w", err)
	}
	tally := map[store.State]int64{}
	byNode, byPrincipal := map[string]store.Usage{}, map[string]store.Usage{}
	principals := map[string]string{} // principal -> a node of one of its records
	for _, rec := range all {
		tally[rec.State]++
		principals[rec.Principal] = rec.Node
		if !rec.State.Live() {
			continue
		}
		for m, k := range map[*map[string]store.Usage]string{&byNode: rec.Node, &byPrincipal: rec.Principal} {
			u := (*m)[k]
			u.Sandboxes++
			u.CPUMHz += rec.CPUMHz
			u.MemoryMB += rec.MemoryMB
			(*m)[k] = u
		}
	}
	for _, st := range store.States() {
		if tally[st] != inv.States[st] {
			r.Problems = append(r.Problems, fmt.Sprintf("counts: %d %s records, but the count says %d", tally[st], st, inv.States[st]))
		}
	}
	nodes, err := s.ListNodes(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("maintain: check: %w", err)
	}
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.Name] = true
	}
	for n := range byNode {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		got, err := s.NodeUsage(ctx, n)
		if err != nil {
			return Report{}, fmt.Errorf("maintain: check: %w", err)
		}
		if got != byNode[n] {
			r.Problems = append(r.Problems, fmt.Sprintf("node %s: use %+v, its live records hold %+v", n, got, byNode[n]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(principals)) {
		var seen store.Usage
		probe := store.Sandbox{ID: "sandgate-store-check-probe", Node: principals[p], Principal: p, State: store.StateStarting}
		err := s.Reserve(ctx, probe, func(f store.ReserveFacts) error {
			seen = f.Principal
			return errProbe
		})
		if !errors.Is(err, errProbe) {
			return Report{}, fmt.Errorf("maintain: check: reading the use of %s: %w", p, err)
		}
		if seen != byPrincipal[p] {
			r.Problems = append(r.Problems, fmt.Sprintf("principal %s: use %+v, its live records hold %+v", p, seen, byPrincipal[p]))
		}
	}
	return r, nil
}
