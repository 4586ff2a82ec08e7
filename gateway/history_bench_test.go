//go:build linux

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/jobspec"
	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
	"sandgate/store/bolt"
)

// BenchmarkGatewayHistory measures what the gateway pays per request as
// the store's history grows: 100, 10,000 and 100,000 records, the newest
// tenth live and the rest ended, over 10 agents, two nodes and a few
// labels, each with the spec the renderer makes for it. Every figure goes
// through the real gateway (the Echo handler, in process, with
// httptest.NewRecorder), the embedded policy bundle, a bbolt file opened as
// the gateway opens it, and the Nomad simulator:
//
//   - list_page: GET /v1/sandboxes pages that hold as many items at 100
//     records as at 100,000: the operator's whole history (?all=true,
//     100 a page), the operator's live sandboxes (10 a page), an agent's
//     own history (10) and an agent's own live sandboxes (1);
//   - reaper_pass: Server.Reap with nothing due and nothing to prune;
//   - scrape: GET /metrics;
//   - create_decision: the two decisions of an operator's create, built as
//     the create handler builds them: the token read and the authz
//     decision, then Store.Reserve whose admit callback builds the
//     admission input from the facts read in the write transaction and
//     asks the engine, then aborts (nothing is written);
//   - create: POST /v1/sandboxes end to end (the simulator places at
//     once; two durable store writes), with the DELETE that follows
//     outside the timer.
//
// Each sub-benchmark also reports the process's CPU time per iteration
// (cpu-ns/op, which a busy machine inflates far less than ns/op) and, once
// it has run, the process's VmRSS, the file-backed part of it (RssFile: the
// test binary and the pages of the store's memory-mapped file that were
// touched) and the Go heap in use after a GC. The history is loaded before the gateway starts, through
// the store's own writes (Reserve, then one Update to running or to ended)
// on the file opened with bolt.Options.NoSync (no fsync per write): about
// 1.5-2 minutes for 100,000 records on a 2-vCPU machine. The file is then
// closed and the gateway opens it as a production one does.
//
//	go test -run '^$' -bench GatewayHistory -benchtime 200x ./gateway/
//
// historySizes are the history sizes the benchmark loads: 100, 10,000 and
// 100,000 records, or only 100 in the once-through run CI makes of every
// benchmark (-benchtime 1x, docs/benchmarks.md), where one sample says
// nothing about a size and 10,000 records take minutes to load under
// -race. Every sub-benchmark still runs.
func historySizes() []int {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return []int{100}
	}
	return []int{100, 10_000, 100_000}
}

func BenchmarkGatewayHistory(b *testing.B) {
	ctx := context.Background()
	engine, err := gatewaytest.SharedEngine()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range historySizes() {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, gatewaytest.StoreFile)
			start := time.Now()
			specBytes := loadHistory(b, path, n, engine.Settings())
			// The loader's garbage is not the gateway's: hand it back
			// before the gateway starts, so RSS is what serving costs.
			debug.FreeOSMemory()
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			h := newHistoryHarness(b, dir)
			// Printed, not logged: a parent benchmark's log is not shown.
			fmt.Printf("records=%d: loaded in %s, file %.1f MB, %d B per spec; VmRSS %.0f MB at the gateway's start\n",
				n, time.Since(start).Round(time.Millisecond), float64(fi.Size())/1e6, specBytes/n, procStatusMB(b, "VmRSS")[0])

			agent := h.mint(token.RoleAgent, historyAgent)
			b.Run("list_page", func(b *testing.B) {
				for _, c := range []struct {
					name, tok, query string
					items            int
				}{
					{"operator", h.operator, "?all=true&limit=100", 100},
					{"operator-live", h.operator, "?limit=10", 10},
					{"agent", agent, "?all=true&limit=10", 10},
					{"agent-live", agent, "?limit=1", 1},
				} {
					b.Run(c.name, func(b *testing.B) {
						b.ReportAllocs()
						var page struct{ Sandboxes []json.RawMessage }
						w := h.handle(http.MethodGet, "/v1/sandboxes"+c.query, c.tok, nil)
						if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != http.StatusOK || len(page.Sandboxes) != c.items {
							b.Fatalf("GET /v1/sandboxes%s: %d, %d items (want %d), %v: %.300s", c.query, w.Code, len(page.Sandboxes), c.items, err, w.Body.Bytes())
						}
						cpu0 := cpuTime()
						for b.Loop() {
							if w := h.handle(http.MethodGet, "/v1/sandboxes"+c.query, c.tok, nil); w.Code != http.StatusOK {
								b.Fatalf("GET /v1/sandboxes%s: %d %s", c.query, w.Code, w.Body.Bytes())
							}
						}
						report(b, cpu0, 0)
					})
				}
			})
			b.Run("reaper_pass", func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if ended, err := h.srv.Reap(ctx); err != nil || ended != 0 {
						b.Fatalf("Reap = %d, %v; want nothing due", ended, err)
					}
				}
				report(b, cpu0, 0)
			})
			b.Run("scrape", func(b *testing.B) {
				b.ReportAllocs()
				want := fmt.Appendf(nil, "sandgate_sandboxes{state=\"ended\"} %d\n", n-n/10)
				cpu0 := cpuTime()
				for b.Loop() {
					w := h.handle(http.MethodGet, "/metrics", "", nil)
					if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), want) {
						b.Fatalf("GET /metrics: %d, no %q", w.Code, want)
					}
				}
				report(b, cpu0, 0)
			})
			b.Run("create_decision", func(b *testing.B) {
				b.ReportAllocs()
				decide := newCreateDecision(b, h)
				cpu0 := cpuTime()
				for b.Loop() {
					decide()
				}
				report(b, cpu0, 0)
			})
			b.Run("create", func(b *testing.B) {
				b.ReportAllocs()
				var untimed time.Duration // the DELETE's CPU time
				cpu0 := cpuTime()
				for b.Loop() {
					w := h.handle(http.MethodPost, "/v1/sandboxes", h.operator, []byte(`{}`))
					if w.Code != http.StatusCreated {
						b.Fatalf("create: %d %s", w.Code, w.Body.Bytes())
					}
					b.StopTimer()
					d0 := cpuTime()
					var v struct{ ID string }
					_ = json.Unmarshal(w.Body.Bytes(), &v)
					if d := h.handle(http.MethodDelete, "/v1/sandboxes/"+v.ID, h.operator, nil); d.Code != http.StatusNoContent {
						b.Fatalf("destroy %q: %d %s", v.ID, d.Code, d.Body.Bytes())
					}
					untimed += cpuTime() - d0
					b.StartTimer()
				}
				report(b, cpu0, untimed)
			})
			m := procStatusMB(b, "VmRSS", "RssAnon", "RssFile", "VmHWM")
			fmt.Printf("records=%d: after its benchmarks VmRSS %.0f MB (anonymous %.0f, file-backed %.0f), peak %.0f MB\n", n, m[0], m[1], m[2], m[3])
		})
	}
}

// historyNow is the gateway's clock in these benchmarks: every live record
// expires after it, every ended record ended before it and within the
// default retention (7 days), so a reaper pass has nothing to end or prune.
var historyNow = time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)

// historyAgent is the agent whose own listings are measured; it holds a
// tenth of every history.
const historyAgent = "agent-04"

// historyNodes are the simulator's two workers, enrolled with room for
// every live record of the longest history.
var historyNodes = []store.Node{
	{Name: "worker-1", Enrollment: "sandbox", State: "active", MaxSandboxes: 1 << 20, CPUMHz: 1 << 40, MemoryMB: 1 << 40},
	{Name: "worker-2", Enrollment: "sandbox", State: "active", MaxSandboxes: 1 << 20, CPUMHz: 1 << 40, MemoryMB: 1 << 40},
}

// historyRecord is the i-th of n records, as the create handler makes it
// (its job rendered by jobspec.Render), and whether it ends. The oldest
// nine tenths are ended: created 5 s apart from an hour before
// historyNow backwards (100,000 records: 5.2 days), each ended 20 minutes
// after its create. The newest tenth is live, created over the last 50
// minutes, so it expires after historyNow under the default one-hour TTL.
// Agents, nodes and labels rotate.
func historyRecord(st policies.Settings, i, n int) (store.Sandbox, bool, error) {
	live := n / 10
	ended := i < n-live
	var created time.Time
	if ended {
		created = historyNow.Add(-time.Hour - time.Duration(n-live-i)*5*time.Second)
	} else {
		created = historyNow.Add(-50 * time.Minute * time.Duration(n-i) / time.Duration(live)).Truncate(time.Second)
	}
	node := historyNodes[(i/10)%len(historyNodes)].Name
	spec, _, jobJSON, err := jobspec.Render(st, jobspec.Request{Node: node}, created)
	if err != nil {
		return store.Sandbox{}, false, fmt.Errorf("render record %d: %w", i, err)
	}
	rec := store.Sandbox{
		ID: spec.ID, JobID: spec.JobID(), Node: node, Principal: fmt.Sprintf("agent:agent-%02d", i%10),
		Profile: string(spec.Profile), Network: string(spec.Network), Image: spec.Image,
		CPUMHz: int64(spec.CPUMHz), MemoryMB: int64(spec.MemoryMB),
		Labels: map[string]string{
			"team": []string{"infra", "ml", "web", "data"}[i%4], "ticket": fmt.Sprintf("T-%d", i%997), "purpose": "ci",
		},
		State: store.StateStarting, CreatedAt: created, UpdatedAt: created,
		ExpiresAt: created.Add(spec.TTL), CeilingAt: spec.CeilingAt(),
		TokenDigest: token.Digest("session-" + spec.ID), TokenJTI: jobspec.NewSandboxID(), Spec: jobJSON,
	}
	return rec, ended, nil
}

// loadHistory writes n records to a new store file at path through the
// store's own write path: Reserve (starting), then one Update to running,
// or straight to ended for the ended ones (a running step in between
// would leave nothing behind). The file is opened with NoSync (no fsync
// per write) and closed cleanly. It returns the specs' total size.
func loadHistory(b *testing.B, path string, n int, st policies.Settings) int {
	b.Helper()
	ctx := context.Background()
	clk := gatewaytest.NewClock(historyNow)
	s, err := bolt.Open(path, bolt.Options{NoSync: true, Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}()
	for _, node := range historyNodes {
		if err := s.PutNode(ctx, node); err != nil {
			b.Fatal(err)
		}
	}
	// The loader allocates fast and keeps little: collect rarely. Records
	// are made (rendered) on another goroutine while the store writes.
	defer debug.SetGCPercent(debug.SetGCPercent(1000))
	type made struct {
		rec   store.Sandbox
		ended bool
		err   error
	}
	recs, stop := make(chan made, 256), make(chan struct{})
	defer close(stop)
	go func() {
		defer close(recs)
		for i := range n {
			var m made
			m.rec, m.ended, m.err = historyRecord(st, i, n)
			select {
			case recs <- m:
			case <-stop:
				return
			}
			if m.err != nil {
				return
			}
		}
	}()
	specBytes, i := 0, -1
	for m := range recs {
		if m.err != nil {
			b.Fatal(m.err)
		}
		rec, ended := m.rec, m.ended
		i++
		specBytes += len(rec.Spec)
		clk.Set(rec.CreatedAt)
		if err := s.Reserve(ctx, rec, nil); err != nil {
			b.Fatal(err)
		}
		at := rec.CreatedAt.Add(time.Second) // running, or ended 20 minutes on
		if ended {
			at = rec.CreatedAt.Add(20 * time.Minute)
		}
		clk.Set(at)
		alloc := fmt.Sprintf("%08x-1f2e-4d3c-8b7a-%012x", i, i)
		if _, err := s.Update(ctx, rec.ID, func(r *store.Sandbox) error {
			r.State, r.AllocID = store.StateRunning, alloc
			if ended {
				r.State, r.EndReason, r.TokenDigest = store.StateEnded, "destroyed", ""
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return specBytes
}

// newHistoryHarness is the harness's gateway on the store file loaded
// beforehand into dir (newHarness opens a new one, and puts nodes: the
// loader put historyNodes), with the clock stopped at historyNow, a
// simulator that places allocations at once and no HTTP listener (handle
// serves each request in process).
func newHistoryHarness(b *testing.B, dir string) *harness {
	b.Helper()
	return harnessOf(b, gatewaytest.New(b, gatewaytest.Options{
		DataDir: dir, Nodes: []store.Node{}, Clock: gatewaytest.NewClock(historyNow),
		// The clock stands still: rate limits (Q1) no benchmark reaches.
		PolicyDir:    gatewaytest.BundleWithRateLimits(b, gatewaytest.GenerousRateLimits()),
		SimConfig:    func(c *nomadsim.Config) { c.RunDelay = -1 }, // running at once: a create costs what the gateway does
		NomadConfig:  func(c *nomad.Config) { c.PollInterval = time.Millisecond },
		ObserveNomad: true, NoListener: true,
	}))
}

// handle serves one request with the gateway's handler, in process.
func (h *harness) handle(method, path, tok string, body []byte) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(w, req)
	return w
}

// errDecided aborts the Reserve of a create_decision once admission allowed.
var errDecided = errors.New("decided; nothing is written")

// newCreateDecision returns one create's decisions for the operator, as
// createSandbox and the middleware before it make them: the token read of
// authentication, the authz decision on POST /v1/sandboxes, then inside
// Store.Reserve's write transaction the admission input built from the
// node's and the principal's live use read there, and the admission
// decision. The job is rendered and Nomad's node and usage read once,
// outside the timer: neither depends on the store.
func newCreateDecision(b *testing.B, h *harness) func() {
	b.Helper()
	ctx := context.Background()
	st := h.engine.Settings()
	claims, err := h.iss.Verify(h.operator)
	if err != nil {
		b.Fatal(err)
	}
	node, err := h.nc.Node(ctx, historyNodes[0].Name)
	if err != nil {
		b.Fatal(err)
	}
	usage, err := h.nc.NodeUsage(ctx, node.ID)
	if err != nil {
		b.Fatal(err)
	}
	now := h.clock.Now()
	spec, _, jobJSON, err := jobspec.Render(st, jobspec.Request{Node: node.Name}, now)
	if err != nil {
		b.Fatal(err)
	}
	rec := store.Sandbox{
		ID: spec.ID, JobID: spec.JobID(), Node: node.Name, Principal: policies.PrincipalFacts{Role: string(claims.Role), Sub: claims.Subject}.ID(),
		Profile: string(spec.Profile), Network: string(spec.Network), Image: spec.Image,
		CPUMHz: int64(spec.CPUMHz), MemoryMB: int64(spec.MemoryMB), State: store.StateStarting,
		CreatedAt: now, ExpiresAt: now.Add(spec.TTL), CeilingAt: spec.CeilingAt(), UpdatedAt: now, Spec: jobJSON,
	}
	def := st.NodeBudgetDefault
	return func() {
		t, err := h.st.GetToken(ctx, claims.ID)
		if err != nil {
			b.Fatal(err)
		}
		authz := policies.AuthzInput{
			Now:     now.Unix(),
			Request: policies.Request{Method: http.MethodPost, Route: "/v1/sandboxes"},
			Token: &policies.TokenFacts{
				Role: string(claims.Role), Sub: claims.Subject, Scopes: claims.Scopes,
				Exp: claims.ExpiresAt.Unix(), JTI: claims.ID, Active: t.RevokedAt.IsZero(),
			},
		}
		if d, err := h.engine.Decide(ctx, policies.Authz, authz.Value()); err != nil || !d.Allow {
			b.Fatalf("authz: %v %v", d.RuleIDs(), err)
		}
		err = h.st.Reserve(ctx, rec, func(f store.ReserveFacts) error {
			lim := def
			if f.NodeInfo != nil {
				lim = policies.BudgetLimits{MaxSandboxes: f.NodeInfo.MaxSandboxes, CPUMHz: f.NodeInfo.CPUMHz, MemoryMB: f.NodeInfo.MemoryMB}
			}
			nf := nodefacts.Of(node, false, f.NodeInfo, &usage)
			// Nomad's room as large as the budget: B1's budget decides.
			nf.Capacity = &policies.NodeCapacity{Allocatable: policies.Resources{CPUMHz: lim.CPUMHz, MemoryMB: lim.MemoryMB}}
			in := jobspec.AdmissionInput(spec, jobJSON, nf, policies.Budget{
				Limits: lim,
				Used:   policies.BudgetUse{Sandboxes: f.Node.Sandboxes, CPUMHz: f.Node.CPUMHz, MemoryMB: f.Node.MemoryMB},
			}, policies.PrincipalFacts{Sub: claims.Subject, Role: string(claims.Role), LiveSandboxes: f.Principal.Sandboxes},
				jobspec.NomadMounts(st))
			v, err := in.Value()
			if err != nil {
				return err
			}
			d, err := h.engine.Decide(ctx, policies.Admission, v)
			if err != nil {
				return err
			}
			if !d.Allow {
				return fmt.Errorf("admission denied: %v", d.RuleIDs())
			}
			return errDecided
		})
		if !errors.Is(err, errDecided) {
			b.Fatalf("Reserve: %v", err)
		}
	}
}

// cpuTime is the CPU time the process has used so far, user and system,
// on every thread: the request's goroutines, the simulator's and the GC's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds to b's results, once its loop has ended: the process's CPU
// time per iteration since cpu0, less untimed (cpu-ns/op: unlike ns/op it
// does not count the time spent waiting for a CPU on a busy machine), then
// the process's VmRSS, its file-backed part and the Go heap in use after a
// GC, in MB.
func report(b *testing.B, cpu0, untimed time.Duration) {
	b.Helper()
	b.ReportMetric(float64(cpuTime()-cpu0-untimed)/float64(b.N), "cpu-ns/op")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := procStatusMB(b, "VmRSS", "RssFile")
	b.ReportMetric(m[0], "VmRSS-MB")
	b.ReportMetric(m[1], "RssFile-MB")
	b.ReportMetric(float64(ms.HeapInuse)/1e6, "HeapInuse-MB")
}

// procStatusMB reads fields of /proc/self/status given in kB (VmRSS,
// RssAnon, RssFile, VmHWM), in MB.
func procStatusMB(b *testing.B, fields ...string) []float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	out := make([]float64, len(fields))
	for i, name := range fields {
		_, v, ok := strings.Cut(string(raw), "\n"+name+":")
		v, _, _ = strings.Cut(v, " kB\n")
		kb, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil {
			b.Fatalf("/proc/self/status: no %s in kB", name)
		}
		out[i] = kb * 1024 / 1e6
	}
	return out
}
