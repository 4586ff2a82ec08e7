package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/internal/pgtest"
	"sandgate/policies"
	"sandgate/policies/datapatch"
	"sandgate/policies/policytest"
)

// benchWorkers is how many clients send at once.
const benchWorkers = 16

// BenchmarkReplicas measures one deployment after another: one gateway
// on bbolt (the baseline), then one, two and three replicas on one
// PostgreSQL database, each on a new simulated cluster of the same
// configuration (a shared one would carry one deployment's jobs into the
// next one's reconcile). For each: the p50 of a create made alone (what
// the store adds to one create), creates per second with benchWorkers
// clients spreading creates and destroys over the replicas, and sandbox
// status reads per second the same way; the PostgreSQL ones also as
// ratios to the baseline of the same run. b.N scales the work (a unit:
// one create alone, one create and 10 status reads a worker): run it
// with -benchtime Nx (docs/benchmarks.md, "Several replicas"). The
// bundle is the embedded one with rate limits far above what the clients
// send, so the gateways, not the buckets, are measured.
func BenchmarkReplicas(b *testing.B) {
	pgtest.SharedDSN(b)
	policy := unlimitedPolicy(b)
	// base is bolt-1's figures by b.N: the testing package runs each
	// sub-benchmark once with b.N = 1 before the b.N asked for.
	base := map[int]benchFigures{}
	for _, c := range []struct {
		name     string
		replicas int
		pg       bool
	}{{"bolt-1", 1, false}, {"postgres-1", 1, true}, {"postgres-2", 2, true}, {"postgres-3", 3, true}} {
		b.Run(c.name, func(b *testing.B) {
			o := deploymentOptions{Replicas: c.replicas, Budget: 40, PolicyDir: policy}
			if c.pg {
				o.DSN = pgtest.Database(b)
			}
			d := deploy(b, o)
			b.ResetTimer()
			f := measure(b, d, b.N)
			b.ReportMetric(f.createP50.Seconds()*1000, "create-p50-ms")
			b.ReportMetric(f.creates, "creates/s")
			b.ReportMetric(f.status, "status/s")
			if !c.pg {
				base[b.N] = f
				return
			}
			bolt, ok := base[b.N]
			if !ok {
				return // bolt-1 was filtered out: no ratios
			}
			b.ReportMetric(float64(f.createP50)/float64(bolt.createP50), "create-p50-x-bolt")
			b.ReportMetric(f.creates/bolt.creates, "creates-x-bolt")
			b.ReportMetric(f.status/bolt.status, "status-x-bolt")
		})
	}
}

// unlimitedPolicy is the embedded bundle, its rate limits raised out of
// the way and its tests cut to one an entrypoint (each start runs them).
func unlimitedPolicy(b testing.TB) string {
	b.Helper()
	dir := policytest.CopyWithSmallTests(b, policies.EmbeddedBundle(), []string{"authz", "admission", "lifecycle", "hosts", "reclaim", "isolation"})
	limit := map[string]any{"requests_per_second": 1_000_000, "burst": 1_000_000}
	patch, _ := json.Marshal(map[string]any{"sandgate": map[string]any{"config": map[string]any{"rate_limits": map[string]any{
		"operator": limit, "reviewer": limit, "agent": limit, "session": limit, "anonymous": limit,
	}}}})
	done := false
	return policytest.EditFile(b, dir, "data.json", func(data []byte) []byte {
		out, err := datapatch.Apply(data, patch)
		if err != nil {
			b.Fatal(err)
		}
		done = true
		return out
	}, &done)
}

// benchFigures is what measure found.
type benchFigures struct {
	createP50       time.Duration
	creates, status float64 // per second
}

// measure drives d: sequential creates for the p50, then benchWorkers
// clients creating and destroying, then benchWorkers clients reading the
// status of a sandbox each; requests go round the replicas.
func measure(b *testing.B, d *deployment, n int) benchFigures {
	b.Helper()
	ctx := context.Background()
	ops := make([]*client.Client, len(d.replicas))
	for i, r := range d.replicas {
		ops[i] = r.client(b, d.operator)
	}
	req := client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64)), TTLSeconds: new(int64(600))}
	var f benchFigures

	// Alone: what one create costs.
	var lat []time.Duration
	for i := range n {
		began := time.Now()
		sb, err := ops[i%len(ops)].CreateSandbox(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(began))
		if err := ops[(i+1)%len(ops)].DestroySandbox(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	f.createP50 = lat[len(lat)/2]

	// Creates at once, each destroyed through the next replica.
	total := int64(n * benchWorkers)
	var next atomic.Int64
	began := time.Now()
	run(b, func(int) error {
		for {
			i := int(next.Add(1)) - 1
			if int64(i) >= total {
				return nil
			}
			sb, err := ops[i%len(ops)].CreateSandbox(ctx, req)
			if err != nil {
				return fmt.Errorf("create %d: %w", i, err)
			}
			if err := ops[(i+1)%len(ops)].DestroySandbox(ctx, sb.ID); err != nil {
				return fmt.Errorf("destroy %s: %w", sb.ID, err)
			}
		}
	})
	f.creates = float64(total) / time.Since(began).Seconds()

	// Status reads, a sandbox a worker, with its session token.
	sessions := make([][]*client.Client, benchWorkers)
	ids := make([]string, benchWorkers)
	for w := range benchWorkers {
		sb, err := ops[w%len(ops)].CreateSandbox(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		ids[w] = sb.ID
		for _, r := range d.replicas {
			sessions[w] = append(sessions[w], r.client(b, sb.Token))
		}
	}
	reads := 10 * n
	began = time.Now()
	run(b, func(w int) error {
		for i := range reads {
			if _, err := sessions[w][i%len(d.replicas)].GetSandbox(ctx, ids[w]); err != nil {
				return fmt.Errorf("status of %s: %w", ids[w], err)
			}
		}
		return nil
	})
	f.status = float64(reads*benchWorkers) / time.Since(began).Seconds()
	for w, id := range ids {
		if err := sessions[w][0].DestroySandbox(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// run runs work on benchWorkers goroutines and fails b with the first
// error.
func run(b *testing.B, work func(worker int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, benchWorkers)
	for w := range benchWorkers {
		wg.Go(func() {
			if err := work(w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
