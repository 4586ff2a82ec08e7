// Package bolt is the default store.Store: one bbolt file, one writer at a
// time. Every write runs in a single bbolt read-write transaction, so a
// Reserve's admit check and the insert it guards can never interleave with
// another write, and a sandbox's budget, its index entries and the state
// counters move in the same transaction as its record.
//
// Schema 2 (this build) holds these buckets; keys.go documents the index
// key encodings:
//
//	sandboxes        id -> record JSON without the spec
//	specs            id -> the rendered job, as handed to Reserve
//	by_state         state, created                -> (empty): every record
//	by_principal     principal, state, created     -> (empty): every record
//	by_node          node, state, created          -> (empty): every record
//	by_expiry        min(ExpiresAt, CeilingAt), id -> (empty): live records
//	by_ended         EndedAt, id                   -> (empty): terminal records
//	state_counts     state -> record count (8 bytes, big-endian)
//	node_usage       node name -> live use (JSON)
//	principal_usage  principal -> live use (JSON)
//	nodes            name -> node record (JSON)
//	tokens           jti -> token record (JSON)
//	meta             schema (the version), cursor_key (signs page cursors)
//
// Open migrates a schema 1 file (records with their spec inline, no
// indexes) in one transaction; see schema.go.
package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"sandgate/store"
)

// SchemaVersion is the layout this package reads and writes. Open migrates
// an older file and refuses one whose recorded version is newer.
const SchemaVersion = 2

// Defaults applied by Open to zero Options fields.
const (
	DefaultTimeout  = time.Second
	DefaultFileMode = os.FileMode(0o600)
)

var (
	// ErrLocked means another process (usually a running gateway) holds
	// the file's lock and did not release it within Options.Timeout.
	ErrLocked = errors.New("bolt: database file is locked by another process")
	// ErrNewerSchema means the file was written by a newer sandgate whose
	// layout this build does not understand; Open refuses it untouched.
	ErrNewerSchema = errors.New("bolt: database schema is newer than this sandgate supports")
)

var _ store.Store = (*Store)(nil)

// Bucket names.
var (
	bucketSandboxes      = []byte("sandboxes")
	bucketSpecs          = []byte("specs")
	bucketByState        = []byte("by_state")
	bucketByPrincipal    = []byte("by_principal")
	bucketByNode         = []byte("by_node")
	bucketByExpiry       = []byte("by_expiry")
	bucketByEnded        = []byte("by_ended")
	bucketByIdempotency  = []byte("by_idempotency")
	bucketStateCounts    = []byte("state_counts")
	bucketNodeUsage      = []byte("node_usage")
	bucketPrincipalUsage = []byte("principal_usage")
	bucketNodes          = []byte("nodes")
	bucketTokens         = []byte("tokens")
	bucketMeta           = []byte("meta")
	keySchema            = []byte("schema")
	keyCursorKey         = []byte("cursor_key")
)

// indexBuckets are derived from the sandboxes bucket: migration rebuilds
// them from the records.
var indexBuckets = [][]byte{
	bucketByState, bucketByPrincipal, bucketByNode, bucketByExpiry, bucketByEnded, bucketByIdempotency,
	bucketStateCounts, bucketNodeUsage, bucketPrincipalUsage,
}

// allBuckets is every bucket of schema 2.
var allBuckets = append([][]byte{bucketSandboxes, bucketSpecs, bucketNodes, bucketTokens, bucketMeta}, indexBuckets...)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Timeout is how long Open waits for the file's exclusive lock before
	// failing with ErrLocked. Zero or negative: DefaultTimeout (1s).
	Timeout time.Duration
	// Now is the clock used for UpdatedAt, and for CreatedAt, EndedAt and
	// node UpdatedAt when the caller leaves them zero. Nil: time.Now.
	Now func() time.Time
	// FileMode is the permission of a newly created file; an existing
	// file keeps its mode. Zero: DefaultFileMode (0600).
	FileMode os.FileMode
	// NoSync skips the fsync after each commit (bbolt's DB.NoSync), so a
	// write costs no disk flush. Benchmarks and tests only: a crash can
	// lose committed writes, budget reservations included. The gateway
	// never sets it.
	NoSync bool
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FileMode == 0 {
		o.FileMode = DefaultFileMode
	}
	return o
}

// Store is a store.Store backed by one bbolt file. It is safe for
// concurrent use. The callbacks handed to Reserve and Update run inside the
// write transaction and must not call the Store.
type Store struct {
	path string
	now  func() time.Time

	// mu guards db: methods hold it for reading while they use db, Close
	// holds it for writing, so Close waits for calls in flight and no call
	// ever reaches a closed bbolt handle. db is nil once closed.
	mu sync.RWMutex
	db *bbolt.DB

	// cursorKey signs ListPage cursors (meta/cursor_key, made once per
	// file), so a cursor from another file or query is refused.
	cursorKey []byte
}

// Open opens (creating if needed) the store file at path. A missing parent
// directory is created with mode 0700. Open fails with ErrLocked when
// another process holds the file for longer than opts.Timeout, and with
// ErrNewerSchema when the file was written by a newer sandgate. A schema 1
// file is migrated to schema 2 before Open returns (see migrateV1).
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if path == "" {
		return nil, errors.New("store: open: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db, err := bbolt.Open(path, opts.FileMode, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store: open %s: %w (waited %s; is a sandgate gateway already running with this file?): %w",
			path, ErrLocked, opts.Timeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	var cursorKey []byte
	err = db.Update(func(tx *bbolt.Tx) error {
		var err error
		cursorKey, err = initSchema(tx)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &Store{path: path, now: opts.Now, db: db, cursorKey: cursorKey}, nil
}

// Ping reports whether the store is open and its file readable.
func (s *Store) Ping(ctx context.Context) error {
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return errors.New("meta bucket missing")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Close waits for calls in flight, then releases the file and its lock.
// Later calls return store.ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}

// view runs fn in a read-only transaction after checking ctx and that the
// store is open.
func (s *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return store.ErrClosed
	}
	return s.db.View(fn)
}

// update runs fn in a read-write transaction. ctx is checked before and
// again once the writer lock is held, so a caller that gave up while
// waiting for the lock writes nothing.
func (s *Store) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return store.ErrClosed
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(tx)
	})
}

// getJSON decodes the value at key into v; store.ErrNotFound if absent.
func getJSON(b *bbolt.Bucket, key string, v any) error {
	raw := b.Get([]byte(key))
	if raw == nil {
		return store.ErrNotFound
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %q: %w", key, err)
	}
	return nil
}

// putJSON encodes v and stores it at key.
func putJSON(b *bbolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return b.Put([]byte(key), raw)
}

// invalid builds an error wrapping store.ErrInvalid that names the field.
func invalid(field, reason string) error { return store.Invalid(field, reason) }

// SchemaVersions reports the file's recorded schema version and the one
// this build writes (equal once Open has run: it migrates).
func (s *Store) SchemaVersions(ctx context.Context) (have, known int, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		have, err = recordedVersion(tx)
		return err
	})
	return have, SchemaVersion, err
}
