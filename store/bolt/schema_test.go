package bolt_test

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
	"sandgate/store/bolt"
)

var v1Time = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// v1Record is a record as schema 1 stored it: spec inline, principal as
// the token's bare sub.
func v1Record(id, principal string, st store.State, minutes int, spec string) store.Sandbox {
	r := store.Sandbox{
		ID: id, JobID: "sandgate-sbx-" + id, Node: "w1", Principal: principal,
		Profile: "strict", Network: "none", Image: "ubuntu:24.04", CPUMHz: 500, MemoryMB: 512,
		Labels: map[string]string{"team": "a"}, State: st,
		CreatedAt: v1Time.Add(time.Duration(minutes) * time.Minute),
		ExpiresAt: v1Time.Add(time.Hour), CeilingAt: v1Time.Add(4 * time.Hour), UpdatedAt: v1Time,
	}
	if spec != "" {
		r.Spec = []byte(spec)
	}
	if !st.Live() {
		r.EndedAt, r.EndReason = v1Time.Add(time.Duration(minutes+1)*time.Minute), "destroyed"
	}
	return r
}

// writeV1 builds a schema 1 file by hand, as a schema 1 sandgate left it:
// six buckets, records with their spec inline, use keyed by the bare
// principal.
func writeV1(t *testing.T, path string, recs []store.Sandbox, extra func(*bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	defer func() { _ = db.Close() }()
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"sandboxes", "node_usage", "principal_usage", "nodes", "tokens", "meta"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		nodeUse, principalUse := map[string]store.Usage{}, map[string]store.Usage{}
		for _, r := range recs {
			raw, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := tx.Bucket([]byte("sandboxes")).Put([]byte(r.ID), raw); err != nil {
				return err
			}
			if r.State.Live() {
				hold(nodeUse, r.Node, r)
				hold(principalUse, r.Principal, r)
			}
		}
		for bucket, use := range map[string]map[string]store.Usage{"node_usage": nodeUse, "principal_usage": principalUse} {
			for k, u := range use {
				raw, _ := json.Marshal(u)
				if err := tx.Bucket([]byte(bucket)).Put([]byte(k), raw); err != nil {
					return err
				}
			}
		}
		node, _ := json.Marshal(store.Node{Name: "w1", State: "active", MaxSandboxes: 4})
		if err := tx.Bucket([]byte("nodes")).Put([]byte("w1"), node); err != nil {
			return err
		}
		tok, _ := json.Marshal(store.Token{JTI: "t1", Role: "operator", Subject: "ops"})
		if err := tx.Bucket([]byte("tokens")).Put([]byte("t1"), tok); err != nil {
			return err
		}
		if err := tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("1")); err != nil {
			return err
		}
		if extra != nil {
			return extra(tx)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("write schema 1 file: %v", err)
	}
}

// hold adds r's resources to use[key].
func hold(use map[string]store.Usage, key string, r store.Sandbox) {
	u := use[key]
	u.Sandboxes, u.CPUMHz, u.MemoryMB = u.Sandboxes+1, u.CPUMHz+r.CPUMHz, u.MemoryMB+r.MemoryMB
	use[key] = u
}

// dump reads every bucket of a closed file: bucket -> key -> value.
func dump(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	defer func() { _ = db.Close() }()
	out := map[string]map[string]string{}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			kv := map[string]string{}
			out[string(name)] = kv
			return b.ForEach(func(k, v []byte) error { kv[string(k)] = string(v); return nil })
		})
	})
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	return out
}

func TestSchema1FileIsMigratedOnOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	recs := []store.Sandbox{
		v1Record("a", "alice", store.StateRunning, 0, `{"Job":{"ID":"a"}}`),
		v1Record("b", "alice", store.StateEnded, 1, `{"Job":{"ID":"b"}}`),
		v1Record("c", "agent:bob", store.StateStarting, 2, `{"Job":{"ID":"c"}}`),
		v1Record("d", "carol", store.StateFailed, 3, ""),
	}
	writeV1(t, path, recs, nil)

	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open of a schema 1 file: %v", err)
	}
	a, err := s.Get(ctx, "a")
	if err != nil || a.Principal != "legacy:alice" || string(a.Spec) != `{"Job":{"ID":"a"}}` {
		t.Fatalf("Get(a) = %+v, %v; want principal legacy:alice and its spec", a, err)
	}
	if c, err := s.Get(ctx, "c"); err != nil || c.Principal != "agent:bob" {
		t.Fatalf("Get(c) = %+v, %v; want its role-qualified principal kept", c, err)
	}
	list, err := s.List(ctx, store.Filter{})
	if err != nil || !slices.Equal(listIDs(list), []string{"a", "b", "c", "d"}) {
		t.Fatalf("List = %v, %v; want a b c d", listIDs(list), err)
	}
	for _, q := range []struct {
		q    store.Query
		want []string
	}{
		{store.Query{Principal: "legacy:alice"}, []string{"a", "b"}},
		{store.Query{Principal: "alice"}, []string{}},
		{store.Query{Principal: "legacy:carol"}, []string{"d"}},
		{store.Query{States: []store.State{store.StateStarting, store.StateRunning}}, []string{"a", "c"}},
		{store.Query{Node: "w1", States: []store.State{store.StateEnded}}, []string{"b"}},
	} {
		page, err := s.ListPage(ctx, q.q)
		if err != nil || !slices.Equal(listIDs(page.Items), q.want) {
			t.Errorf("ListPage(%+v) = %v, %v; want %v", q.q, listIDs(page.Items), err, q.want)
		}
	}
	if due, err := s.Due(ctx, v1Time.Add(2*time.Hour)); err != nil || !slices.Equal(listIDs(due), []string{"a", "c"}) {
		t.Errorf("Due = %v, %v; want the live a and c", listIDs(due), err)
	}
	want := map[store.State]int64{store.StateStarting: 1, store.StateRunning: 1, store.StateFailed: 1, store.StateEnded: 1}
	if got, err := s.Counts(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Counts = %v, %v; want %v", got, err, want)
	}
	if u, err := s.NodeUsage(ctx, "w1"); err != nil || u != (store.Usage{Sandboxes: 2, CPUMHz: 1000, MemoryMB: 1024}) {
		t.Errorf("NodeUsage(w1) = %+v, %v; want a and c", u, err)
	}
	for principal, want := range map[string]int64{"legacy:alice": 1, "alice": 0, "agent:bob": 1} {
		var facts store.ReserveFacts
		_ = s.Reserve(ctx, store.Sandbox{ID: "probe", Node: "w1", Principal: principal, State: store.StateStarting},
			func(f store.ReserveFacts) error { facts = f; return context.Canceled })
		if facts.Principal.Sandboxes != want {
			t.Errorf("principal %s holds %d sandboxes, want %d", principal, facts.Principal.Sandboxes, want)
		}
	}
	if n, err := s.GetNode(ctx, "w1"); err != nil || n.MaxSandboxes != 4 {
		t.Errorf("GetNode(w1) = %+v, %v; want it kept", n, err)
	}
	if tok, err := s.GetToken(ctx, "t1"); err != nil || tok.Subject != "ops" {
		t.Errorf("GetToken(t1) = %+v, %v; want it kept", tok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	migrated := dump(t, path)
	if got := migrated["meta"]["schema"]; got != "2" {
		t.Errorf("meta schema = %q, want 2", got)
	}
	for id, raw := range migrated["sandboxes"] {
		if strings.Contains(raw, `"spec"`) {
			t.Errorf("record %s still holds its spec inline: %s", id, raw)
		}
	}
	if got := slices.Sorted(maps.Keys(migrated["specs"])); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("specs holds %v, want a b c (d had none)", got)
	}
	if got := slices.Sorted(maps.Keys(migrated["principal_usage"])); !slices.Equal(got, []string{"agent:bob", "legacy:alice"}) {
		t.Errorf("principal_usage holds %v, want agent:bob and legacy:alice", got)
	}

	// Opening again changes nothing.
	s, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if again := dump(t, path); !reflect.DeepEqual(again, migrated) {
		t.Errorf("a second Open changed the migrated file")
	}
}

func TestFailedMigrationLeavesTheFileAsItWas(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	recs := []store.Sandbox{v1Record("a", "alice", store.StateRunning, 0, `{}`)}
	writeV1(t, path, recs, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("sandboxes")).Put([]byte("broken"), []byte("{not json"))
	})
	before := dump(t, path)
	s, err := bolt.Open(path, bolt.Options{})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a schema 1 file holding a broken record succeeded")
	}
	if !strings.Contains(err.Error(), "migrate schema 1 to 2") || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Open = %v, want a migration error naming the record", err)
	}
	if after := dump(t, path); !reflect.DeepEqual(after, before) {
		t.Errorf("a failed migration changed the file")
	}
}

func TestCursorSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Reserve(ctx, live(id), nil); err != nil {
			t.Fatalf("Reserve(%s): %v", id, err)
		}
	}
	page, err := s.ListPage(ctx, store.Query{Limit: 2})
	if err != nil || page.Next == "" {
		t.Fatalf("ListPage = %+v, %v", page, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = mustOpen(t, path)
	page, err = s.ListPage(ctx, store.Query{Limit: 2, Cursor: page.Next})
	if err != nil || len(page.Items) != 1 || page.Next != "" {
		t.Fatalf("ListPage after reopen = %v, next %q, %v; want the last record", listIDs(page.Items), page.Next, err)
	}
}

func mustOpen(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func listIDs(recs []store.Sandbox) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}
