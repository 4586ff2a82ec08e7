package gateway_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"sandgate/gateway/gatewaytest"
	"sandgate/jobspec"
	"sandgate/nomad"
	"sandgate/store"
)

// The gateway's cost on top of Nomad, measured on the simulator: each
// benchmark has a baseline that does the same Nomad work with the nomad
// client directly, so the ratio is the price of authn, two policy
// decisions, the store transaction and the decision log.
//
//	go test -run '^$' -bench 'Gateway' -benchmem ./gateway/

func benchHarness(b *testing.B) *harness {
	// Rate limits (Q1) no benchmark reaches: they measure the gateway's
	// cost, not fair use.
	h := newHarness(b, harnessOptions{policyDir: gatewaytest.BundleWithRateLimits(b, gatewaytest.GenerousRateLimits()), nodes: []store.Node{
		{Name: "worker-1", Enrollment: "sandbox", State: "active", MaxSandboxes: 1 << 20, CPUMHz: 1 << 40, MemoryMB: 1 << 40},
		{Name: "worker-2", Enrollment: "sandbox", State: "active", MaxSandboxes: 1 << 20, CPUMHz: 1 << 40, MemoryMB: 1 << 40},
	}})
	return h
}

func BenchmarkGatewayCreateDestroy(b *testing.B) {
	h := benchHarness(b)
	b.Run("gateway", func(b *testing.B) {
		for b.Loop() {
			id := h.gw.Create(h.operator, nil).ID
			if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusNoContent {
				b.Fatalf("destroy: %d %s", r.Status, r.Body)
			}
		}
	})
	b.Run("baseline-nomad-client", func(b *testing.B) {
		nc := h.nomadClient()
		st := h.engine.Settings()
		for b.Loop() {
			_, job, _, err := jobspec.Render(st, jobspec.Request{Node: "worker-1"}, h.now())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			eval, err := nc.Register(ctx, job)
			if err != nil {
				b.Fatal(err)
			}
			if pl, err := nc.WaitPlacement(ctx, *job.ID, eval); err != nil || pl.State != nomad.PlacementRunning {
				b.Fatalf("%v %v", pl, err)
			}
			if err := nc.Purge(ctx, *job.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkGatewayExec(b *testing.B) {
	h := benchHarness(b)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	rec, err := h.st.Get(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("gateway", func(b *testing.B) {
		for b.Loop() {
			if r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"echo", "hi"}}); r.Status != http.StatusOK {
				b.Fatalf("exec: %d %s", r.Status, r.Body)
			}
		}
	})
	b.Run("baseline-nomad-client", func(b *testing.B) {
		nc := h.nomadClient()
		for b.Loop() {
			if code, err := nc.Exec(context.Background(), rec.AllocID, "sandbox", []string{"timeout", "-k", "5", "60", "echo", "hi"}, nil, io.Discard, io.Discard); err != nil || code != 0 {
				b.Fatalf("%d %v", code, err)
			}
		}
	})
}
