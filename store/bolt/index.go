package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"sandgate/store"
)

// A record is stored in two places, sandboxes (JSON without the spec) and
// specs, and is reflected in the derived buckets: its index entries, its
// state's count and, while live, its node's and principal's use. Every
// write changes a record and its derived entries in one transaction.

// indexEntry is one key a record holds in one index bucket. Index values
// are empty: the key is the whole entry.
type indexEntry struct {
	bucket []byte
	key    []byte
}

// indexEntries lists the keys rec holds: by_state, by_principal and
// by_node always, by_idempotency with an idempotency key, by_expiry while
// live, by_ended once terminal.
func indexEntries(rec store.Sandbox) []indexEntry {
	created := createdKey(rec)
	out := []indexEntry{
		{bucketByState, append(statePrefix(nil, rec.State), created...)},
		{bucketByPrincipal, append(ownerPrefix(rec.Principal, rec.State), created...)},
		{bucketByNode, append(ownerPrefix(rec.Node, rec.State), created...)},
	}
	if rec.IdempotencyKey != "" {
		out = append(out, indexEntry{bucketByIdempotency, append(appendSized(nil, rec.IdempotencyKey), created...)})
	}
	if rec.State.Live() {
		return append(out, indexEntry{bucketByExpiry, expiryKey(rec)})
	}
	return append(out, indexEntry{bucketByEnded, endedKey(rec)})
}

// hasEntry reports whether es holds e.
func hasEntry(es []indexEntry, e indexEntry) bool {
	for _, x := range es {
		if bytes.Equal(x.bucket, e.bucket) && bytes.Equal(x.key, e.key) {
			return true
		}
	}
	return false
}

// moveIndexes replaces cur's index entries by next's, touching only the
// keys that differ (a change of labels or alloc id touches none).
func moveIndexes(tx *bbolt.Tx, cur, next store.Sandbox) error {
	old, neu := indexEntries(cur), indexEntries(next)
	for _, e := range old {
		if !hasEntry(neu, e) {
			if err := tx.Bucket(e.bucket).Delete(e.key); err != nil {
				return fmt.Errorf("index %s: %w", e.bucket, err)
			}
		}
	}
	for _, e := range neu {
		if !hasEntry(old, e) {
			if err := tx.Bucket(e.bucket).Put(e.key, []byte{}); err != nil {
				return fmt.Errorf("index %s: %w", e.bucket, err)
			}
		}
	}
	return nil
}

// insertDerived adds a newly stored rec to every derived bucket.
func insertDerived(tx *bbolt.Tx, rec store.Sandbox) error {
	for _, e := range indexEntries(rec) {
		if err := tx.Bucket(e.bucket).Put(e.key, []byte{}); err != nil {
			return fmt.Errorf("index %s: %w", e.bucket, err)
		}
	}
	if err := addCount(tx, rec.State, +1); err != nil {
		return err
	}
	if rec.State.Live() {
		return holdBudget(tx, rec, +1)
	}
	return nil
}

// removeTerminal deletes a terminal rec, its spec and its derived entries.
func removeTerminal(tx *bbolt.Tx, rec store.Sandbox) error {
	if rec.State.Live() {
		return fmt.Errorf("record %s is %s: only terminal records are removed", rec.ID, rec.State)
	}
	for _, e := range indexEntries(rec) {
		if err := tx.Bucket(e.bucket).Delete(e.key); err != nil {
			return fmt.Errorf("index %s: %w", e.bucket, err)
		}
	}
	if err := addCount(tx, rec.State, -1); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSpecs).Delete([]byte(rec.ID)); err != nil {
		return err
	}
	return tx.Bucket(bucketSandboxes).Delete([]byte(rec.ID))
}

// addCount adjusts st's record count. Like addUsage it clamps at zero
// (only a damaged file could drive it below) and deletes a zero count, so
// the bucket is the same whether kept up or rebuilt by migrateV1.
func addCount(tx *bbolt.Tx, st store.State, delta int64) error {
	b := tx.Bucket(bucketStateCounts)
	n := max(0, readCount(b, st)+delta)
	if n == 0 {
		return b.Delete([]byte(st))
	}
	return b.Put([]byte(st), binary.BigEndian.AppendUint64(nil, uint64(n))) //nolint:gosec // n > 0
}

// readCount returns st's record count; zero if none is stored.
func readCount(b *bbolt.Bucket, st store.State) int64 {
	v := b.Get([]byte(st))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v)) //nolint:gosec // written from a non-negative int64
}

// putRecord stores rec's JSON without its spec.
func putRecord(tx *bbolt.Tx, rec store.Sandbox) error {
	rec.Spec = nil
	return putJSON(tx.Bucket(bucketSandboxes), rec.ID, rec)
}

// putSpec stores the spec of id; an empty spec deletes any stored one.
// spec must not change before the transaction ends.
func putSpec(tx *bbolt.Tx, id string, spec []byte) error {
	b := tx.Bucket(bucketSpecs)
	if len(spec) == 0 {
		return b.Delete([]byte(id))
	}
	return b.Put([]byte(id), spec)
}

// getSpec returns a copy of the stored spec of id; nil if none.
func getSpec(tx *bbolt.Tx, id string) []byte {
	return bytes.Clone(tx.Bucket(bucketSpecs).Get([]byte(id)))
}

// loadRecord decodes the record at id, without its spec; store.ErrNotFound
// if absent.
func loadRecord(tx *bbolt.Tx, id []byte) (store.Sandbox, error) {
	raw := tx.Bucket(bucketSandboxes).Get(id)
	if raw == nil {
		return store.Sandbox{}, store.ErrNotFound
	}
	var rec store.Sandbox
	if err := json.Unmarshal(raw, &rec); err != nil {
		return store.Sandbox{}, fmt.Errorf("decode %q: %w", id, err)
	}
	return rec, nil
}

// loadIndexed decodes the record an index entry names: an entry without
// its record means the file is damaged, not that the record is missing.
func loadIndexed(tx *bbolt.Tx, bucket, id []byte) (store.Sandbox, error) {
	rec, err := loadRecord(tx, id)
	if errors.Is(err, store.ErrNotFound) {
		// Not ErrNotFound: the caller asked for no particular record.
		return store.Sandbox{}, fmt.Errorf("index %s names %q, which has no record: the file is damaged", bucket, id)
	}
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("index %s: %w", bucket, err)
	}
	return rec, nil
}
