package audit

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// MaxQueryLimit is the most entries one Query returns.
const MaxQueryLimit = 1000

// Query selects decisions from the log. Zero fields select everything.
type Query struct {
	// Since (inclusive) and Until (exclusive) bound the decision time.
	Since, Until time.Time
	// Allow, when set, keeps only allowed (true) or refused (false) ones.
	Allow *bool
	// Rule keeps decisions one of whose violations has this rule id
	// (whatever its mode); Principal, Entrypoint match exactly.
	Rule, Principal, Entrypoint string
	// Limit is how many entries a page holds (1..MaxQueryLimit, default 50).
	Limit int
	// Cursor continues a previous query: Page.Next.
	Cursor string
	// WithInputs keeps the logged inputs in the entries (they are large).
	WithInputs bool
}

// Page is one page of a query: newest first.
type Page struct {
	Entries []Entry
	// Next continues the query with older entries; empty when there are none.
	Next string
}

// ErrBadCursor means a cursor was not one a Query returned.
var ErrBadCursor = errors.New("audit: not a cursor of this log")

// cursor points just before an entry: the next page holds entries older
// than the one it names.
type cursor struct {
	Time       time.Time `json:"t"`
	DecisionID string    `json:"d"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.DecisionID == "" {
		return c, ErrBadCursor
	}
	return c, nil
}

// Query reads the retained log (the rotated files, oldest first, then the
// live file as it was when the query began; or, with Config.Shared, the
// log every replica writes) and returns the newest entries that match q
// and are older than q.Cursor. It never blocks the writers for longer
// than it takes to open the files.
func (l *Log) Query(q Query) (Page, error) {
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 1 || q.Limit > MaxQueryLimit {
		return Page{}, fmt.Errorf("audit: limit %d is not in [1, %d]", q.Limit, MaxQueryLimit)
	}
	var cur *cursor
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		cur = &c
	}
	if l.cfg.Shared != nil {
		return l.querySharedLog(q, cur)
	}
	files, err := l.snapshot()
	if err != nil {
		return Page{}, err
	}
	defer func() {
		for _, f := range files {
			_ = f.f.Close()
		}
	}()
	// The last Limit matches before the cursor, in log order.
	needles := q.needles()
	window := make([]Entry, 0, q.Limit)
	dropped := false
	stop := false
	for _, f := range files {
		if stop {
			break
		}
		sc := bufio.NewScanner(io.LimitReader(f.f, f.size))
		sc.Buffer(make([]byte, 64<<10), MaxLineBytes+2*MaxInputBytes)
		for sc.Scan() {
			line := sc.Bytes()
			if cur != nil && bytes.Contains(line, []byte(cur.DecisionID)) {
				var e Entry
				if json.Unmarshal(line, &e) == nil && e.DecisionID == cur.DecisionID {
					stop = true
					break
				}
			}
			if !prefilter(line, needles) {
				continue
			}
			var e Entry
			if json.Unmarshal(line, &e) != nil {
				continue // a line cut by a crash mid-write
			}
			// An entry newer than the cursor is skipped even when the
			// cursor's own entry has rotated away.
			if !q.matches(e) || (cur != nil && e.Time.After(cur.Time)) {
				continue
			}
			if !q.WithInputs {
				e.Input = nil
			}
			if len(window) == q.Limit {
				window = window[1:]
				dropped = true
			}
			window = append(window, e)
		}
		if err := sc.Err(); err != nil {
			return Page{}, fmt.Errorf("audit: query: %w", err)
		}
	}
	slices.Reverse(window)
	p := Page{Entries: window}
	if dropped && len(window) > 0 {
		last := window[len(window)-1]
		p.Next = cursor{Time: last.Time, DecisionID: last.DecisionID}.encode()
	}
	return p, nil
}

// needles are the filter values a line must contain to match: a line
// holds each as JSON wrote it, so only values JSON writes as they are (no
// quote, backslash, <, >, & or control) are looked for; the others are
// compared once decoded (matches).
func (q Query) needles() [][]byte {
	var out [][]byte
	for _, s := range []string{q.Rule, q.Principal, q.Entrypoint} {
		if enc, err := json.Marshal(s); s != "" && err == nil && string(enc) == `"`+s+`"` {
			out = append(out, []byte(s))
		}
	}
	return out
}

// prefilter skips lines that cannot match without decoding them.
func prefilter(line []byte, needles [][]byte) bool {
	for _, n := range needles {
		if !bytes.Contains(line, n) {
			return false
		}
	}
	return true
}

func (q Query) matches(e Entry) bool {
	switch {
	case !q.Since.IsZero() && e.Time.Before(q.Since):
		return false
	case !q.Until.IsZero() && !e.Time.Before(q.Until):
		return false
	case q.Allow != nil && e.Allow != *q.Allow:
		return false
	case q.Principal != "" && e.Principal != q.Principal:
		return false
	case q.Entrypoint != "" && e.Entrypoint != q.Entrypoint:
		return false
	case q.Rule != "" && !slices.Contains(e.RuleIDs, q.Rule) &&
		!slices.ContainsFunc(e.Violations, func(v Violation) bool { return v.Rule == q.Rule }):
		return false
	}
	return true
}

// openFile is one file of the log, read up to size.
type openFile struct {
	f    *os.File
	size int64
}

// snapshot opens every retained file, oldest first, under the writers'
// lock: a rotation afterwards renames them but cannot change what is read.
func (l *Log) snapshot() ([]openFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var files []openFile
	fail := func(err error) ([]openFile, error) {
		for _, f := range files {
			_ = f.f.Close()
		}
		return nil, fmt.Errorf("audit: query: %w", err)
	}
	for i := l.cfg.Keep; i >= 0; i-- {
		name := l.cfg.Path
		if i > 0 {
			name = fmt.Sprintf("%s.%d", l.cfg.Path, i)
		}
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return fail(err)
		}
		size := st.Size()
		if i == 0 {
			size = l.size
		}
		files = append(files, openFile{f: f, size: size})
	}
	return files, nil
}

// ReadFile reads every entry of one decision log file (for `sandgate
// policy replay`); lines that do not parse are counted, not fatal.
func ReadFile(r io.Reader, each func(Entry) error) (skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes+2*MaxInputBytes)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			skipped++
			continue
		}
		if err := each(e); err != nil {
			return skipped, err
		}
	}
	return skipped, sc.Err()
}

// Each hands every retained entry, oldest first, to each (the live file
// as it was when Each began; or, with Config.Shared, every entry of the
// log the replicas share); it stops at each's first error.
func (l *Log) Each(each func(Entry) error) error {
	if l.cfg.Shared != nil {
		return l.eachShared(each)
	}
	files, err := l.snapshot()
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			_ = f.f.Close()
		}
	}()
	for _, f := range files {
		if _, err := ReadFile(io.LimitReader(f.f, f.size), each); err != nil {
			return err
		}
	}
	return nil
}
