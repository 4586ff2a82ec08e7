package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

var errRollback = errors.New("roll back")

// contents reads the records, specs and every derived bucket: bucket ->
// key -> value.
func contents(tx *bbolt.Tx) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, name := range append([][]byte{bucketSandboxes, bucketSpecs}, indexBuckets...) {
		kv := map[string]string{}
		_ = tx.Bucket(name).ForEach(func(k, v []byte) error { kv[string(k)] = string(v); return nil })
		out[string(name)] = kv
	}
	return out
}

// TestKeptIndexesEqualARebuild runs a random history through the public
// methods, then runs the migration over the result in a transaction it
// rolls back, and requires the buckets kept up write by write to equal the
// rebuilt ones byte for byte, and the records and specs to be unchanged:
// the indexes are exactly what the records say, and migrateV1 is
// idempotent.
func TestKeptIndexesEqualARebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s.Close() }()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7)) //nolint:gosec // a reproducible test sequence
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func() time.Time { return base.Add(time.Duration(rng.IntN(100)) * time.Second) }
	states := []store.State{store.StateStarting, store.StateRunning, store.StateFailed, store.StateEnded}
	var ids []string
	for i := range 200 {
		switch {
		case len(ids) == 0 || rng.IntN(3) == 0:
			rec := store.Sandbox{
				ID: fmt.Sprintf("s%03d", i), Node: []string{"w1", "w1\x00", "w"}[rng.IntN(3)],
				Principal: []string{"agent:a", "agent:a\x00b", "operator:o"}[rng.IntN(3)],
				State:     states[rng.IntN(2)], CPUMHz: 100, MemoryMB: 64,
				CreatedAt: at(), ExpiresAt: at(), CeilingAt: at(), Spec: []byte(`{}`),
			}
			if err := s.Reserve(ctx, rec, nil); err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			ids = append(ids, rec.ID)
		case rng.IntN(8) == 0:
			if _, err := s.Prune(ctx, at(), 1+rng.IntN(3)); err != nil {
				t.Fatalf("Prune: %v", err)
			}
		default:
			to := states[rng.IntN(4)]
			_, err := s.Update(ctx, ids[rng.IntN(len(ids))], func(r *store.Sandbox) error {
				if !r.State.Live() && to.Live() {
					return nil
				}
				r.State, r.CreatedAt, r.ExpiresAt = to, at(), at()
				if rng.IntN(2) == 0 {
					r.EndedAt = at()
				}
				return nil
			})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Update: %v", err)
			}
		}
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		kept := contents(tx)
		if err := migrateV1(tx); err != nil {
			return err
		}
		if rebuilt := contents(tx); !reflect.DeepEqual(kept, rebuilt) {
			for _, name := range append([][]byte{bucketSandboxes, bucketSpecs}, indexBuckets...) {
				k, r := kept[string(name)], rebuilt[string(name)]
				if !maps.Equal(k, r) {
					t.Errorf("%s kept %d keys, rebuilt %d; they differ", name, len(k), len(r))
				}
			}
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("rebuild: %v", err)
	}
}

func TestTimeKeysSortAsTimes(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{}, time.Unix(-1, 0), time.Unix(-1, 999999999), time.Unix(0, 0), time.Unix(0, 1),
		time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Date(2030, 1, 2, 3, 4, 5, 7, time.UTC), time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}
	for _, a := range times {
		for _, b := range times {
			if got, want := bytes.Compare(appendTime(nil, a), appendTime(nil, b)), a.Compare(b); got != want {
				t.Errorf("key order of %s vs %s = %d, time order %d", a, b, got, want)
			}
		}
	}
}

// TestOwnerRangesNeverOverlap checks that no key of one (owner, state)
// range starts with another range's prefix, for owners that are prefixes
// of one another or differ only after a 0x00 byte.
func TestOwnerRangesNeverOverlap(t *testing.T) {
	t.Parallel()
	owners := []string{"a", "a\x00", "a\x00b", "ab", "a\x01", "\x00", "\x00\x00\x00\x01a"}
	ids := []string{"x", "\x00", "\x01\x02\x03\x04"}
	for _, o1 := range owners {
		for _, s1 := range allStates {
			prefix := ownerPrefix(o1, s1)
			for _, o2 := range owners {
				for _, s2 := range allStates {
					for _, id := range ids {
						rec := store.Sandbox{ID: id, CreatedAt: time.Unix(int64(len(o2)), 0)}
						key := append(ownerPrefix(o2, s2), createdKey(rec)...)
						if same := o1 == o2 && s1 == s2; bytes.HasPrefix(key, prefix) != same {
							t.Errorf("key of (%q, %s, %q) in range (%q, %s): %v", o2, s2, id, o1, s1, !same)
						}
					}
				}
			}
		}
	}
}

func TestADamagedIndexIsAnErrorNotNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s.Close() }()
	rec := store.Sandbox{ID: "a", Node: "w1", Principal: "agent:a", State: store.StateRunning}
	if err := s.Reserve(ctx, rec, nil); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	err = s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketSandboxes).Delete([]byte("a")) })
	if err != nil {
		t.Fatalf("damage: %v", err)
	}
	_, errPage := s.ListPage(ctx, store.Query{})
	_, errDue := s.Due(ctx, time.Now())
	_, errList := s.List(ctx, store.Filter{LiveOnly: true})
	for name, err := range map[string]error{"ListPage": errPage, "Due": errDue, "List": errList} {
		if err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s over a damaged index = %v, want an error other than ErrNotFound", name, err)
		}
	}
}
