package replicas

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/internal/pgtest"
)

// TestEveryReplicaAnswersForTheWholeDeployment: a token minted through
// one replica verifies on every other, a sandbox made through one is
// driven through the others, a revocation through one is refused by
// every replica at once, and GET /v1/decisions through any replica
// answers with the decisions of all of them, each naming its replica.
func TestEveryReplicaAnswersForTheWholeDeployment(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	d := newDeployment(t, dsn, 3)
	ctx := context.Background()
	r1, r2, r3 := d.replicas[0], d.replicas[1], d.replicas[2]
	tk, err := r1.client(t, d.operator).MintToken(ctx, client.MintRequest{
		Role: new(client.RoleAgent), Subject: new("roaming-agent"), TTLSeconds: new(int64(3600))})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r2.client(t, tk.Token).CreateSandbox(ctx, client.CreateRequest{CPUMHz: new(int64(100)), MemoryMB: new(int64(64))})
	if err != nil {
		t.Fatalf("create through %s with a token minted through %s: %v", r2.name, r1.name, err)
	}
	if _, err := r3.client(t, sb.Token).GetSandbox(ctx, sb.ID); err != nil {
		t.Fatalf("status through %s with the session token %s issued: %v", r3.name, r2.name, err)
	}
	if res, err := r1.client(t, sb.Token).Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"echo", "hi"}}); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("exec through %s: %+v %v", r1.name, res, err)
	}
	// A refusal on replica-1, to find in the others' answers.
	_, err = r1.client(t, sb.Token).Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"-rf"}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusForbidden || !slices.Contains(p.RuleIDs, "E1") || p.DecisionID == "" {
		t.Fatalf("exec of -rf through %s: %v, want 403 naming E1", r1.name, err)
	}
	refused := p.DecisionID

	if err := r3.client(t, d.operator).RevokeToken(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	for _, r := range d.replicas {
		_, err := r.client(t, tk.Token).ListSandboxes(ctx, false)
		if !errors.As(err, &p) || p.Status != http.StatusUnauthorized {
			t.Fatalf("the token revoked through %s, used on %s at once: %v, want 401", r3.name, r.name, err)
		}
	}

	for _, r := range d.replicas {
		ds, err := r.client(t, d.operator).Decisions(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		byReplica := map[string]int{}
		found := false
		for _, e := range ds {
			byReplica[e.Replica]++
			if e.DecisionID == refused {
				found = e.Replica == r1.name && !e.Allow && slices.Contains(e.RuleIDs, "E1")
			}
		}
		if !found {
			t.Fatalf("GET /v1/decisions through %s does not show %s's refusal %s", r.name, r1.name, refused)
		}
		for _, name := range []string{r1.name, r2.name, r3.name} {
			if byReplica[name] == 0 {
				t.Fatalf("GET /v1/decisions through %s shows no decision of %s: %v", r.name, name, byReplica)
			}
		}
	}
}

// TestTwoReplicasGivenOneNameNeverBothHoldTheLease: a copied config that
// names two processes alike (or a container's pid 1 on one host) must
// not make them both the holder of the background lease; the lease
// names each process's instance too.
func TestTwoReplicasGivenOneNameNeverBothHoldTheLease(t *testing.T) {
	t.Parallel()
	d := newDeployment(t, pgtest.Database(t), 0)
	twins := []*replica{d.add("twin"), d.add("twin")}
	for _, r := range twins {
		d.start(r)
	}
	holder := d.holder(twins, 60*time.Second)
	for range 50 {
		var held int
		for _, r := range twins {
			if b, ok := r.lease(); ok && b.Held {
				held++
			}
		}
		if held > 1 {
			t.Fatalf("both replicas named twin hold the background lease")
		}
	}
	b, _ := holder.lease()
	if b.Replica != "twin" || !strings.HasPrefix(b.Holder, "twin#") {
		t.Fatalf("/readyz says %+v; want replica twin, holder twin#<instance>", b)
	}
}
