// Package audit writes sandgate's decision log: one JSON line per policy
// decision, allow or deny, in <data>/decisions.jsonl, rotated by size.
// Security reviewers read it to learn which rule denied what, under which
// bundle revision, and query it (Query, GET /v1/decisions). By default the
// input itself is not logged (it can hold a command line), only its
// SHA-256; with inputs on (decision_log.include_inputs) each line also
// keeps the input, masked (MaskInput), so a candidate bundle can be
// replayed against real decisions.
//
// On a store that several replicas share (the PostgreSQL store), the log
// is shared too (Config.Shared): every line is also appended to the
// store, and queries and replays read the store, so they answer for the
// whole deployment (shared.go).
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"sandgate/gateway/wire"
	"sandgate/internal/clip"
	"sandgate/store"
)

// Entry is one decision, as the log keeps it and GET /v1/decisions
// answers it (wire.Decision).
type Entry = wire.Decision

// Violation is one violation of a decision (wire.Violation).
type Violation = wire.Violation

// Config says where and how big.
type Config struct {
	// Path of the live file, e.g. <data>/decisions.jsonl.
	Path string
	// MaxBytes rotates the file once it would grow past this; default 64 MiB.
	MaxBytes int64
	// Keep is how many rotated files (decisions.jsonl.1 ... .N) are kept; default 5.
	Keep int
	// Replica names the gateway writing the log: every line carries it
	// (a line that names its own keeps it), so the lines of several
	// replicas, shipped to one place, say where each decision was taken.
	Replica string
	// Shared, when set, is the decision log the replicas of a deployment
	// share (the PostgreSQL store): every entry is appended there too,
	// before its line is written here, and Query and Each read it
	// (shared.go). nil: this file is the whole log.
	Shared store.DecisionLog
}

// Log is a size-rotated JSON-lines file, safe for concurrent use. Every
// Write is one write(2) of one complete line.
type Log struct {
	cfg  Config
	ship *shipper // nil without Config.Shared
	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (or creates, mode 0600) the log.
func Open(cfg Config) (*Log, error) {
	if cfg.Path == "" {
		return nil, errors.New("audit: Config.Path is required")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 64 << 20
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 5
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l := &Log{cfg: cfg}
	if cfg.Shared != nil {
		l.ship = &shipper{sink: cfg.Shared}
	}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", l.cfg.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit: stat %s: %w", l.cfg.Path, err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write appends one entry: to the shared log first, when there is one,
// then to the file. An error means the entry was not recorded (when only
// the file failed, the shared log has it); the caller must refuse the
// request it was deciding.
func (l *Log) Write(e Entry) error {
	if e.Replica == "" {
		e.Replica = l.cfg.Replica
	}
	line, b, err := encodeLine(e)
	if err != nil {
		return err
	}
	if l.ship != nil {
		if err := l.ship.ship(sharedDecision(b, line[:len(line)-1])); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("audit: log is closed")
	}
	if l.size > 0 && l.size+int64(len(line)) > l.cfg.MaxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit: write: %w", err)
	}
	return nil
}

// Bounds of one entry: whatever a request carries, its line stays under
// MaxLineBytes, so no single request can flush the retained log.
const (
	// MaxFieldBytes bounds every identifying field (ids, principal,
	// method, route, sandbox id).
	MaxFieldBytes = 128
	// MaxTextBytes bounds the free-text fields (action, error).
	MaxTextBytes = 1024
	// MaxRuleIDs bounds how many rule ids one entry lists.
	MaxRuleIDs = 32
	// MaxLineBytes is the most one entry without its input can take in
	// the file.
	MaxLineBytes = 8 << 10
	// MaxViolations and MaxViolationMsg bound the violations one entry
	// keeps: a message can quote a request's values.
	MaxViolations   = 16
	MaxViolationMsg = 256
	// MaxInputBytes bounds a logged input; a larger one is left out and
	// InputOmitted says so.
	MaxInputBytes = 64 << 10
)

// Bounded returns e with every field cut to its bound: a cut field ends
// with "...(+N bytes)" so a reader sees it was cut and by how much.
func Bounded(e Entry) Entry {
	for _, f := range []*string{&e.DecisionID, &e.Entrypoint, &e.Revision, &e.InputSHA, &e.Principal,
		&e.Method, &e.Route, &e.RequestID, &e.ClientRequestID, &e.SandboxID} {
		*f = clip.String(*f, MaxFieldBytes)
	}
	e.Action = clip.String(e.Action, MaxTextBytes)
	e.Error = clip.String(e.Error, MaxTextBytes)
	ids := make([]string, 0, min(len(e.RuleIDs), MaxRuleIDs))
	for i, r := range e.RuleIDs {
		if i == MaxRuleIDs {
			ids = append(ids, fmt.Sprintf("...(+%d rule ids)", len(e.RuleIDs)-MaxRuleIDs))
			break
		}
		ids = append(ids, clip.String(r, 32))
	}
	e.RuleIDs = ids
	vs := make([]Violation, 0, min(len(e.Violations), MaxViolations))
	for i, v := range e.Violations {
		if i == MaxViolations {
			break
		}
		vs = append(vs, Violation{Rule: clip.String(v.Rule, 32), Msg: clip.String(v.Msg, MaxViolationMsg), Mode: clip.String(v.Mode, 16)})
	}
	e.Violations = vs
	if len(e.Input) > MaxInputBytes {
		e.Input, e.InputOmitted = nil, fmt.Sprintf("the input is %d bytes, more than %d", len(e.Input), MaxInputBytes)
	}
	return e
}

// encodeLine is the entry's JSON line, within MaxLineBytes, and the entry
// as the line holds it: JSON escaping can grow a bounded field up to six
// times, so the text bounds shrink until the line fits.
func encodeLine(e Entry) ([]byte, Entry, error) {
	b := Bounded(e)
	for field, text := MaxFieldBytes, MaxTextBytes; ; field, text = field/2, text/4 {
		line, err := json.Marshal(b)
		if err != nil {
			return nil, b, fmt.Errorf("audit: marshal: %w", err)
		}
		if len(line)-len(b.Input) < MaxLineBytes || field < 8 {
			return append(line, '\n'), b, nil
		}
		for _, f := range []*string{&b.Principal, &b.Method, &b.Route, &b.ClientRequestID, &b.SandboxID} {
			*f = clip.String(*f, field)
		}
		b.Action, b.Error = clip.String(b.Action, text), clip.String(b.Error, text)
		for i := range b.Violations {
			b.Violations[i].Msg = clip.String(b.Violations[i].Msg, text/4)
		}
	}
}

// rotate shifts decisions.jsonl.N-1 to .N, the live file to .1, and opens
// a fresh live file. The oldest file beyond Keep is removed.
func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("audit: close for rotation: %w", err)
	}
	l.f = nil
	for i := l.cfg.Keep; i >= 1; i-- {
		from := l.cfg.Path
		if i > 1 {
			from = fmt.Sprintf("%s.%d", l.cfg.Path, i-1)
		}
		to := fmt.Sprintf("%s.%d", l.cfg.Path, i)
		if err := os.Rename(from, to); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit: rotate: %w", err)
		}
	}
	return l.open()
}

// Close closes the file; later writes fail.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
