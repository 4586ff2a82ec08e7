package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"sandgate/internal/pgtest"
	"sandgate/store"
	"sandgate/store/postgres"
)

// gatedSink is a shared log whose first append waits until release is
// closed; it records the size of every append.
type gatedSink struct {
	release chan struct{}
	fail    error

	mu      sync.Mutex
	batches []int
	stored  []store.Decision
}

func (g *gatedSink) AppendDecisions(_ context.Context, ds []store.Decision) error {
	g.mu.Lock()
	first := len(g.batches) == 0
	g.batches = append(g.batches, len(ds))
	g.mu.Unlock()
	if first {
		<-g.release
	}
	if g.fail != nil {
		return g.fail
	}
	g.mu.Lock()
	g.stored = append(g.stored, ds...)
	g.mu.Unlock()
	return nil
}

func (g *gatedSink) Decisions(context.Context, store.DecisionQuery) ([]store.Decision, error) {
	return nil, errors.New("not read in this test")
}

func (g *gatedSink) PruneDecisions(context.Context, time.Time, int) (int, error) { return 0, nil }

// queued is how many decisions wait for the next append.
func (s *shipper) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// While one append is in flight, the decisions written meanwhile wait
// and go together in the next one: under load the appends grow instead
// of multiplying, and every writer learns its own decision's fate.
func TestWritesDuringAnAppendGoTogetherInTheNext(t *testing.T) {
	t.Parallel()
	sink := &gatedSink{release: make(chan struct{})}
	l, err := Open(Config{Path: filepath.Join(t.TempDir(), "decisions.jsonl"), Shared: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const waiting = 20
	errs := make(chan error, waiting+1)
	write := func(i int) {
		errs <- l.Write(Entry{Time: time.Now().UTC(), DecisionID: fmt.Sprintf("d%02d", i), Entrypoint: "authz", Allow: true})
	}
	go write(0)
	for {
		sink.mu.Lock()
		started := len(sink.batches) == 1
		sink.mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond) // a poll interval
	}
	for i := 1; i <= waiting; i++ {
		go write(i)
	}
	for l.ship.queued() < waiting {
		time.Sleep(time.Millisecond) // a poll interval
	}
	close(sink.release)
	for range waiting + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !slices.Equal(sink.batches, []int{1, waiting}) || len(sink.stored) != waiting+1 {
		t.Fatalf("appends of %v decisions, %d stored; want one of 1, then one of %d", sink.batches, len(sink.stored), waiting)
	}
	all, err := l.fileEntries()
	if err != nil || len(all) != waiting+1 {
		t.Fatalf("the file holds %d lines (%v), want %d", len(all), err, waiting+1)
	}
}

// fileEntries reads the live file, whatever Shared says.
func (l *Log) fileEntries() ([]Entry, error) {
	f, err := os.Open(l.cfg.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []Entry
	_, err = ReadFile(f, func(e Entry) error { out = append(out, e); return nil })
	return out, err
}

// A decision the shared log does not take is not recorded anywhere: Write
// fails (the gateway refuses the request) and the file has no line.
func TestADecisionTheSharedLogRefusesIsNotWritten(t *testing.T) {
	t.Parallel()
	sink := &gatedSink{release: make(chan struct{}), fail: fmt.Errorf("%w: the database is down", store.ErrUnavailable)}
	close(sink.release)
	l, err := Open(Config{Path: filepath.Join(t.TempDir(), "decisions.jsonl"), Shared: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.Write(Entry{Time: time.Now().UTC(), DecisionID: "d1", Entrypoint: "authz", Allow: true})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Write: %v, want the shared log's error", err)
	}
	if lines, err := l.fileEntries(); err != nil || len(lines) != 0 {
		t.Fatalf("the file holds %v (%v), want nothing", lines, err)
	}
}

// Two replicas, each with its own file, on one PostgreSQL database: a
// query through either answers for both, newest first, in pages that
// neither skip nor repeat, with the filters of the file's query; Each
// hands every decision of both to a replay, oldest first.
func TestTwoReplicasQueryOneSharedLog(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	var logs []*Log
	for _, name := range []string{"replica-a", "replica-b"} {
		st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		l, err := Open(Config{Path: filepath.Join(t.TempDir(), "decisions.jsonl"), Replica: name, Shared: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		logs = append(logs, l)
	}
	base := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var want []string // newest first
	for i := range 30 {
		e := Entry{Time: base.Add(time.Duration(i/2) * time.Second), DecisionID: fmt.Sprintf("d%02d", i), Entrypoint: "authz",
			Allow: i%3 != 0, Principal: fmt.Sprintf("agent:a%d", i%2), Input: []byte(`{"n":1}`)}
		if !e.Allow {
			e.RuleIDs = []string{"T2"}
			e.Violations = []Violation{{Rule: "T2", Msg: "no"}, {Rule: "H5", Msg: "dry", Mode: "dry_run"}}
		}
		if err := logs[i%2].Write(e); err != nil {
			t.Fatal(err)
		}
		want = append([]string{e.DecisionID}, want...)
	}
	for _, l := range logs {
		var got []string
		replicas := map[string]int{}
		q := Query{Limit: 7}
		for {
			p, err := l.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Entries {
				got = append(got, e.DecisionID)
				replicas[e.Replica]++
				if e.Input != nil {
					t.Fatalf("an entry carries its input unasked: %+v", e)
				}
			}
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
		}
		// Decisions of one second are ordered by id there too.
		if !slices.Equal(got, want) || replicas["replica-a"] != 15 || replicas["replica-b"] != 15 {
			t.Fatalf("through %s: %v by replica %v; want %v, 15 by each", l.cfg.Replica, got, replicas, want)
		}
	}
	no := false
	p, err := logs[1].Query(Query{Allow: &no, Rule: "H5", Principal: "agent:a0", Limit: 50, WithInputs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Entries {
		if e.Allow || e.Principal != "agent:a0" || e.Input == nil {
			t.Fatalf("the filtered query answered %+v", e)
		}
	}
	if len(p.Entries) != 5 { // i = 0, 6, 12, 18, 24
		t.Fatalf("%d refusals of agent:a0 naming H5, want 5", len(p.Entries))
	}
	var replayed []string
	if err := logs[0].Each(func(e Entry) error { replayed = append(replayed, e.DecisionID); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(want)
	if !slices.Equal(replayed, want) {
		t.Fatalf("Each handed %v, want every decision oldest first %v", replayed, want)
	}
	if _, err := logs[0].Query(Query{Cursor: "bm90IGEgY3Vyc29y", Limit: 5}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a cursor that is not one: %v", err)
	}
	n, err := logs[0].Prune(context.Background(), base.Add(5*time.Second))
	if err != nil || n != 10 {
		t.Fatalf("prune the decisions before 5 s: %d, %v; want 10", n, err)
	}
}

// A query of the largest page on the shared log asks the store for no
// more than it serves.
func TestTheLargestPageOfTheSharedLog(t *testing.T) {
	t.Parallel()
	st, err := postgres.Open(context.Background(), pgtest.Database(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l, err := Open(Config{Path: filepath.Join(t.TempDir(), "decisions.jsonl"), Shared: st})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		if err := l.Write(Entry{Time: time.Now().UTC(), DecisionID: fmt.Sprintf("d%d", i), Entrypoint: "authz", Allow: true}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := l.Query(Query{Limit: MaxQueryLimit})
	if err != nil || len(p.Entries) != 3 || p.Next != "" {
		t.Fatalf("the largest page: %d entries, next %q, %v", len(p.Entries), p.Next, err)
	}
}
