// Package postgres is the store.Store for several gateways: one PostgreSQL
// database that every replica reads and writes.
//
// It passes the same conformance suite as store/bolt (store/storetest).
// What bbolt gets from having one writer, this package gets from row
// locks, taken in one global order so that two transactions never wait on
// each other in a circle:
//
//	idempotency key -> node use -> principal use -> sandbox row -> state counts (by state)
//
// A Reserve locks its idempotency key's row (when it has one), then its
// node's and its principal's use rows, reads them, calls admit and
// inserts, all in one transaction: two gateways racing for a node's last
// slot, or for a principal's last quota, are decided one after the other,
// and the second one's admit sees the first one's record. Update locks the
// sandbox row and, when it ends a live record, the two use rows.
//
// The schema lives in migrations/ (embedded), applied at Open under an
// advisory lock so replicas starting together apply each step once; Open
// refuses a database whose schema is newer than this build knows. Errors
// that mean the database cannot serve now (refused or dropped connections,
// a statement timeout, a read-only server, a shutdown) wrap
// store.ErrUnavailable, which the gateway answers with 503.
package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandgate/store"
)

var _ store.Store = (*Store)(nil)

// Defaults applied by Open to zero Options fields.
const (
	DefaultMaxConns         = 16
	DefaultLogConns         = 4
	DefaultConnectTimeout   = 5 * time.Second
	DefaultStatementTimeout = 5 * time.Second
	// countShards is how many rows share each state's count.
	countShards = 16
	// maxAttempts bounds the retries of a transaction PostgreSQL aborted
	// for a deadlock or a serialisation failure.
	maxAttempts = 5
)

// ErrNewerSchema means the database was migrated by a newer sandgate;
// Open refuses it untouched.
var ErrNewerSchema = errors.New("postgres: database schema is newer than this sandgate supports")

// Options configures Open. The zero value is ready to use.
type Options struct {
	// MaxConns bounds the pool of the records; zero: DefaultMaxConns.
	MaxConns int32
	// LogConns bounds the decision log's own pool; zero:
	// DefaultLogConns. The log has a pool apart because a create writes
	// its admission decision while its transaction holds the budget rows
	// locked: from the same pool, the creates waiting on those rows could
	// hold every connection and leave the lock holder none.
	LogConns int32
	// ConnectTimeout bounds making one connection; zero:
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// StatementTimeout is PostgreSQL's statement_timeout (and
	// lock_timeout) on every connection, so no call waits on a slow or
	// locked database for longer; zero: DefaultStatementTimeout.
	StatementTimeout time.Duration
	// Now is the clock for UpdatedAt and defaulted times; nil: time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.LogConns <= 0 {
		o.LogConns = DefaultLogConns
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use by one process, and several processes may open the same
// database. The callbacks handed to Reserve and Update run inside the
// transaction and must not call the Store, except its decision log
// (AppendDecisions, Decisions), which has a pool of its own for that.
type Store struct {
	now    func() time.Time
	target string // the database, for messages: host, port and name, never a password

	// mu guards pool and logPool: methods hold it for reading while they
	// use them, Close for writing; both are nil once closed. pool serves
	// the records, logPool only the decision log (Options.LogConns).
	mu      sync.RWMutex
	pool    *pgxpool.Pool
	logPool *pgxpool.Pool

	cursorKey []byte
}

// Open connects to the database dsn names (a postgres:// URL or a
// key=value string), applies the migrations it lacks and returns the
// store. It fails with ErrNewerSchema for a database of a newer sandgate,
// and with an error wrapping store.ErrUnavailable when the database cannot
// be reached.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("store: open postgres: the DSN does not parse (want postgres://user@host:port/database or key=value pairs)")
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	ms := strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = ms
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = ms
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(4*opts.StatementTimeout.Milliseconds(), 10)
	cfg.ConnConfig.RuntimeParams["application_name"] = "sandgate"
	target := describe(cfg.ConnConfig)
	logCfg := cfg.Copy()
	logCfg.MaxConns = opts.LogConns
	logCfg.ConnConfig.RuntimeParams["application_name"] = "sandgate-decisions"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres %s: %w", target, classify(err))
	}
	logPool, err := pgxpool.NewWithConfig(ctx, logCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open postgres %s: %w", target, classify(err))
	}
	s := &Store{now: opts.Now, target: target, pool: pool, logPool: logPool}
	if s.cursorKey, err = migrate(ctx, pool); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: open postgres %s: %w", target, classify(err))
	}
	return s, nil
}

// describe names the database for messages and logs, without secrets.
func describe(c *pgx.ConnConfig) string {
	u := url.URL{Scheme: "postgres", Host: fmt.Sprintf("%s:%d", c.Host, c.Port), Path: "/" + c.Database}
	if c.User != "" {
		u.User = url.User(c.User)
	}
	return u.String()
}

// Target names the database: scheme, user, host, port and name, never a
// password.
func (s *Store) Target() string { return s.target }

// Ping reports whether the database answers and holds sandgate's schema.
func (s *Store) Ping(ctx context.Context) error {
	err := s.with(ctx, func(p *pgxpool.Pool) error {
		var v int
		return p.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	})
	if err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Close waits for calls in flight, then closes the pool. Later calls
// return store.ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close()
		s.logPool.Close()
		s.pool, s.logPool = nil, nil
	}
	return nil
}

// with runs fn with the pool after checking ctx and that the store is
// open; fn's error is classified.
func (s *Store) with(ctx context.Context, fn func(*pgxpool.Pool) error) error {
	return s.on(ctx, false, fn)
}

// withLog is with on the decision log's pool.
func (s *Store) withLog(ctx context.Context, fn func(*pgxpool.Pool) error) error {
	return s.on(ctx, true, fn)
}

func (s *Store) on(ctx context.Context, log bool, fn func(*pgxpool.Pool) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.pool == nil {
		return store.ErrClosed
	}
	if log {
		return classify(fn(s.logPool))
	}
	return classify(fn(s.pool))
}

// tx runs fn in a READ COMMITTED transaction, committing when it returns
// nil; when ctx carries a lease (store.WithFence), the transaction first
// checks that it is still held (checkFence). Every write goes through tx. A deadlock or serialisation failure is retried, with fn run
// afresh, up to maxAttempts times; fn must therefore be repeatable.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.txOn(ctx, false, fn)
}

// logTx is tx on the decision log's pool.
func (s *Store) logTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.txOn(ctx, true, fn)
}

func (s *Store) txOn(ctx context.Context, log bool, fn func(pgx.Tx) error) error {
	return s.on(ctx, log, func(p *pgxpool.Pool) error {
		var err error
		for attempt := 1; attempt <= maxAttempts; attempt++ {
			err = pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
				if err := checkFence(ctx, tx); err != nil {
					return err
				}
				return fn(tx)
			})
			if !retryable(err) {
				return err
			}
		}
		return err
	})
}

// retryable reports a transaction PostgreSQL aborted to break a deadlock
// or a serialisation conflict.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// classify wraps the errors that mean "the database cannot serve now" in
// store.ErrUnavailable, keeping the cause; it leaves the sentinels of the
// contract and the callers' own errors as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "25006": // read_only_sql_transaction
			return fmt.Errorf("%w: the database is read-only: %w", store.ErrUnavailable, err)
		case pe.Code == "57014": // query_canceled: statement_timeout
			return fmt.Errorf("%w: the database did not answer within the statement timeout: %w", store.ErrUnavailable, err)
		case pe.Code == "55P03": // lock_not_available: lock_timeout
			return fmt.Errorf("%w: a row stayed locked past the lock timeout: %w", store.ErrUnavailable, err)
		case pe.Code[:2] == "08", pe.Code[:2] == "57", pe.Code[:2] == "53": // connection, operator intervention, resources
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// unreachable reports a failure to reach the server, a connection it
// dropped, or a call that timed out on the way.
func unreachable(err error) bool {
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// newKey returns n random bytes.
func newKey(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
