package attack

import (
	"testing"
	"time"

	"sandgate/gateway/token"
)

// mainWorld is the world most attacks run in. Its names:
//
//	tokens   op (operator "ops"), agentA ("alpha"), agentB ("beta"),
//	         opNoScope and agentNoScope ("delta", recorded, no scopes at all),
//	         agentD ("delta" too, with its scopes),
//	         gamma (agent, revoked), opOld (operator, revoked),
//	         short (agent, expired a minute ago),
//	         sess:<sandbox> (each sandbox's session token)
//	sandboxes expiring (agentA, past its expiry, not reaped),
//	         a1, a2 (agentA), b1 (agentB), o1 (op), d1 (agentD), all running;
//	         gone (agentA, destroyed); failed (agentA, registration refused)
func mainWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.mint("agentA", token.RoleAgent, "alpha", 0)
	w.mint("agentB", token.RoleAgent, "beta", 0)
	w.mintScoped("opNoScope", token.RoleOperator, "ops-ro", 0, []string{})
	w.mintScoped("agentNoScope", token.RoleAgent, "delta", 0, []string{})
	w.mint("agentD", token.RoleAgent, "delta", 0) // the same principal, with its scopes
	w.mint("gamma", token.RoleAgent, "gamma", 0)
	w.revoke("gamma")
	w.mint("opOld", token.RoleOperator, "ops-old", 0)
	w.revoke("opOld")
	w.mintFull("short", token.RoleAgent, "short", 0, w.engine.Settings().RoleScopes("agent"), time.Minute)

	w.create("expiring", "agentA", `{"ttl_seconds":60}`)
	w.clock.Advance(2 * time.Minute) // "expiring" and "short" are past their expiry
	w.create("a1", "agentA", "")
	w.create("a2", "agentA", `{"labels":{"task":"target"}}`)
	w.create("b1", "agentB", "")
	w.create("o1", "op", "")
	w.create("d1", "agentD", "")
	w.create("gone", "agentA", "")
	w.destroy("gone")
	w.createFailed("failed", "agentA")
	return w
}

// TestAttacks runs every attack of the table, by category, against one
// world.
func TestAttacks(t *testing.T) {
	t.Parallel()
	w := mainWorld(t)
	for _, cat := range []struct {
		name  string
		cases func(t *testing.T, w *world) []attack
	}{
		{"forged tokens", forgedTokenCases},
		{"revoked and ended tokens", revokedTokenCases},
		{"role route matrix", matrixCases},
		{"other principals", otherPrincipalCases},
		{"encoded ids and dot segments", pathCases},
		{"methods and overrides", methodCases},
		{"body keys and smuggled fields", bodyCases},
		{"integer bounds", integerCases},
		{"exec argv env workdir stdin", execCases},
		{"logs", logsCases},
		{"files", filesCases},
		{"hosts and tokens", adminCases},
	} {
		t.Run(cat.name, func(t *testing.T) { run(t, w, cat.cases(t, w)) })
	}
}
