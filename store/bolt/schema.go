package bolt

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"sandgate/store"
)

// LegacyPrincipalPrefix is put before a schema 1 record's principal that
// has no role. Principals are "<role>:<sub>" since schema 2; a schema 1
// record's role is unknown, so it becomes owned by no agent and is visible
// to operators only.
const LegacyPrincipalPrefix = "legacy:"

// migrateChunk is how many records migrateV1 reads before it rewrites
// them: bbolt cursors must not run across writes to their bucket, and a
// bounded chunk keeps a large file's migration from holding every key.
const migrateChunk = 512

// initSchema checks the recorded schema version before it touches
// anything, creates missing buckets, migrates a schema 1 file, records
// the version and returns the file's cursor key (made on first use).
func initSchema(tx *bbolt.Tx) ([]byte, error) {
	version, err := recordedVersion(tx)
	if err != nil {
		return nil, err
	}
	if version > SchemaVersion {
		return nil, fmt.Errorf("%w: the file has schema %d, this build supports %d; run a newer sandgate",
			ErrNewerSchema, version, SchemaVersion)
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	// Version 0 is a new file, or one whose first Open never committed;
	// migrating its (empty or schema 1) records is the safe reading.
	if version < SchemaVersion {
		if err := migrateV1(tx); err != nil {
			return nil, fmt.Errorf("migrate schema %d to %d: %w", max(version, 1), SchemaVersion, err)
		}
	}
	if err := tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(SchemaVersion))); err != nil {
		return nil, err
	}
	return cursorKey(tx.Bucket(bucketMeta))
}

// recordedVersion returns the file's schema version; 0 when none is
// recorded.
func recordedVersion(tx *bbolt.Tx) (int, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, nil
	}
	v := meta.Get(keySchema)
	if v == nil {
		return 0, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("unrecognised schema version %q", v)
	}
	return n, nil
}

// cursorKey returns meta's cursor key, making a random one if it has none.
func cursorKey(meta *bbolt.Bucket) ([]byte, error) {
	if k := meta.Get(keyCursorKey); len(k) == 32 {
		return bytes.Clone(k), nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("make cursor key: %w", err)
	}
	if err := meta.Put(keyCursorKey, k); err != nil {
		return nil, err
	}
	return k, nil
}

// migrateV1 turns schema 1 records into schema 2 inside tx: each spec
// moves to the specs bucket, a principal without a role becomes
// LegacyPrincipalPrefix + principal, and every derived bucket (indexes,
// state counts, node and principal use) is rebuilt from the records. It is
// idempotent: run on schema 2 contents it changes nothing, since a record
// without an inline spec keeps the one in specs, a prefixed principal has
// its ':', and the derived buckets are rebuilt from scratch.
//
// bbolt splits a node only when the transaction commits, so a million
// inserts at random places of one bucket in one transaction cost a
// quadratic amount of copying. Records and specs are written in id order
// (the order they are read in); index keys are gathered and written
// sorted, so every bucket is filled by appending.
func migrateV1(tx *bbolt.Tx) error {
	for _, name := range indexBuckets {
		if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return fmt.Errorf("drop bucket %s: %w", name, err)
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	for _, name := range [][]byte{bucketSandboxes, bucketSpecs} {
		tx.Bucket(name).FillPercent = migrateFill
	}
	entries := map[string][][]byte{} // index bucket -> its keys
	sandboxes := tx.Bucket(bucketSandboxes)
	var after []byte
	for {
		keys := keysAfter(sandboxes, after, migrateChunk)
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			rec, err := migrateRecord(tx, k)
			if err != nil {
				return err
			}
			for _, e := range indexEntries(rec) {
				entries[string(e.bucket)] = append(entries[string(e.bucket)], e.key)
			}
		}
		after = keys[len(keys)-1]
	}
	for name, keys := range entries {
		slices.SortFunc(keys, bytes.Compare)
		b := tx.Bucket([]byte(name))
		b.FillPercent = migrateFill
		for _, k := range keys {
			if err := b.Put(k, []byte{}); err != nil {
				return fmt.Errorf("index %s: %w", name, err)
			}
		}
	}
	return nil
}

// migrateFill is how full migrateV1 packs the pages it writes in order;
// later writes mostly append (new ids are random, but index keys grow
// with time), so little room is kept for inserts.
const migrateFill = 0.9

// migrateRecord rewrites the record at id in schema 2 form, counts it and,
// if live, holds its budget; the caller writes its index entries.
func migrateRecord(tx *bbolt.Tx, id []byte) (store.Sandbox, error) {
	var rec store.Sandbox
	if err := json.Unmarshal(tx.Bucket(bucketSandboxes).Get(id), &rec); err != nil {
		return rec, fmt.Errorf("decode %q: %w", id, err)
	}
	if !rec.State.Valid() {
		return rec, fmt.Errorf("record %q has unknown state %q", id, rec.State)
	}
	rec.ID = string(id) // the key is what Get finds, should JSON have altered the id
	if len(rec.Spec) == 0 {
		rec.Spec = bytes.Clone(tx.Bucket(bucketSpecs).Get(id))
	}
	if !strings.Contains(rec.Principal, ":") {
		rec.Principal = LegacyPrincipalPrefix + rec.Principal
	}
	if err := putRecord(tx, rec); err != nil {
		return rec, err
	}
	if err := putSpec(tx, rec.ID, rec.Spec); err != nil {
		return rec, err
	}
	if err := addCount(tx, rec.State, +1); err != nil {
		return rec, err
	}
	if rec.State.Live() {
		return rec, holdBudget(tx, rec, +1)
	}
	return rec, nil
}

// keysAfter returns copies of up to n keys of b that follow after (from
// the first key when after is nil).
func keysAfter(b *bbolt.Bucket, after []byte, n int) [][]byte {
	c := b.Cursor()
	var k []byte
	if after == nil {
		k, _ = c.First()
	} else if k, _ = c.Seek(after); bytes.Equal(k, after) {
		k, _ = c.Next()
	}
	var out [][]byte
	for ; k != nil && len(out) < n; k, _ = c.Next() {
		out = append(out, bytes.Clone(k))
	}
	return out
}
