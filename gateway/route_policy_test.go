package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/policies/policytest"
	"sandgate/store"
)

func TestThePolicyInForceIsReadableByOperatorsOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.gw.Do(http.MethodGet, "/v1/policy", h.operator, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/policy as the operator: %d %s", r.Status, r.Body)
	}
	var got client.Policy
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	digest, err := policies.BundleDigest(policies.EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != h.engine.Revision() || got.Digest != digest || got.DigestAlgorithm != policies.DigestAlgorithm || got.Signed {
		t.Fatalf("policy %+v: want revision %s, digest %s (%s), unsigned", got, h.engine.Revision(), digest, policies.DigestAlgorithm)
	}
	if at, err := time.Parse(time.RFC3339Nano, got.LoadedAt); err != nil || at.IsZero() || at.After(time.Now()) {
		t.Fatalf("loaded_at %q: %v", got.LoadedAt, err)
	}
	want := h.engine.Rules()
	if len(got.Rules) != len(want) || len(want) < 30 {
		t.Fatalf("%d rules listed, the engine has %d", len(got.Rules), len(want))
	}
	for i, w := range want {
		g := got.Rules[i]
		if g.ID != w.ID || g.Title != w.Title || g.Description != w.Description || g.Severity != w.Severity ||
			g.Entrypoint != string(w.Entrypoint) || g.Location != w.Location || g.Mode != policies.ModeDeny {
			t.Errorf("rule %d: %+v, want %+v in mode deny", i, g, w)
		}
	}

	agent := h.mint(token.RoleAgent, "reader")
	sid, session := h.gw.Create(agent, nil).IDToken()
	for who, tok := range map[string]string{"an agent": agent, "a session (" + sid + ")": session} {
		r := h.gw.Do(http.MethodGet, "/v1/policy", tok, nil)
		if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), `"rule_ids":["T2"]`) || strings.Contains(string(r.Body), `"rules"`) {
			t.Errorf("GET /v1/policy as %s: %d %s, want 403 T2 and no rule list", who, r.Status, r.Body)
		}
	}
}

// C1 in the gateway: a route the policy's table serves under an advertised
// capability is registered, and a registered protected route is in the
// table under an advertised capability. What GET /v1/capabilities says is
// what answers.
func TestAdvertisedRoutesAreExactlyTheServedOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	raw, err := fs.ReadFile(policies.EmbeddedBundle(), "data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Sandgate struct {
			Config struct {
				Capabilities []string `json:"capabilities"`
				// method -> Echo route template -> entry
				Routes map[string]map[string]struct {
					Capability string `json:"capability"`
				} `json:"routes"`
			} `json:"config"`
		} `json:"sandgate"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	cfg := data.Sandgate.Config
	registered := map[string]bool{}
	for _, rt := range h.srv.Echo().Routes() {
		if !publicPaths[rt.Path] {
			registered[rt.Method+" "+rt.Path] = true
		}
	}
	table := map[string]string{} // "METHOD template" -> capability
	for method, byRoute := range cfg.Routes {
		for route, r := range byRoute {
			table[method+" "+route] = r.Capability
		}
	}
	for key, capability := range table {
		advertised := slices.Contains(cfg.Capabilities, capability)
		if advertised != registered[key] {
			t.Errorf("%s: capability %s advertised %t, route registered %t", key, capability, advertised, registered[key])
		}
	}
	for key := range registered {
		if _, ok := table[key]; !ok {
			t.Errorf("%s is registered but not in the policy's route table", key)
		}
	}
}

// evaluate posts a dry run and returns the answer.
func (h *harness) evaluate(tok string, body any) (apitest.Reply, map[string]any) {
	h.t.Helper()
	r := h.gw.Do(http.MethodPost, "/v1/policy/evaluate", tok, body)
	if r.Status != http.StatusOK {
		return r, nil
	}
	return r, r.JSON(h.t)
}

func ruleIDsOf(m map[string]any) []string {
	var out []string
	for _, v := range m["rule_ids"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

// A dry run of a request builds its input through the live code (the
// router's route and parameters, the route's own body decoding, the
// target's record) and decides what the live request gets, changing
// nothing.
func TestADryRunDecidesWhatTheRequestWouldGet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "ci")
	id, session := h.gw.Create(agent, nil).IDToken()
	before, err := h.st.List(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		method  string
		path    string
		claims  map[string]any
		body    any
		liveTok string
		allow   bool
		rules   []string
	}{
		{"a session token runs a command in its sandbox", http.MethodPost, "/v1/sandboxes/" + id + "/exec",
			map[string]any{"role": "session", "sub": "session:" + id, "sandbox_id": id}, map[string]any{"argv": []string{"echo", "hi"}}, session, true, nil},
		{"an option as the program", http.MethodPost, "/v1/sandboxes/" + id + "/exec",
			map[string]any{"role": "session", "sub": "session:" + id, "sandbox_id": id}, map[string]any{"argv": []string{"-rf", "/"}}, session, false, []string{"E1"}},
		{"a session token lists sandboxes", http.MethodGet, "/v1/sandboxes",
			map[string]any{"role": "session", "sub": "session:" + id, "sandbox_id": id}, nil, session, false, []string{"T2"}},
		{"another agent destroys the sandbox", http.MethodDelete, "/v1/sandboxes/" + id,
			map[string]any{"role": "agent", "sub": "someone-else"}, nil, h.mint(token.RoleAgent, "someone-else"), false, []string{"T2"}},
		{"logs of an unknown stream", http.MethodGet, "/v1/sandboxes/" + id + "/logs?stream=env",
			map[string]any{"role": "agent", "sub": "ci"}, nil, agent, false, []string{"E3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := map[string]any{"method": c.method, "path": c.path, "token_claims": c.claims}
			if c.body != nil {
				req["body"] = c.body
			}
			r, m := h.evaluate(h.operator, map[string]any{"request": req})
			if m == nil {
				t.Fatalf("dry run: %d %s", r.Status, r.Body)
			}
			if m["allow"] != c.allow || m["dry_run"] != true || !slices.Equal(ruleIDsOf(m), c.rules) {
				t.Fatalf("dry run: %s, want allow %v rules %v", r.Body, c.allow, c.rules)
			}
			input := m["input"].(map[string]any)
			if route := input["request"].(map[string]any)["route"]; !strings.HasPrefix(c.path, strings.Split(route.(string), ":")[0]) {
				t.Fatalf("the input's route %v for %s", route, c.path)
			}
			if strings.Contains(c.path, id) && input["sandbox"] == nil {
				t.Fatalf("the target's record was not loaded: %s", r.Body)
			}
			// The live request gets the same decision.
			if c.allow {
				return
			}
			live := h.gw.Do(c.method, c.path, c.liveTok, c.body)
			got := live.JSON(t)
			var liveRules []string
			for _, v := range got["rule_ids"].([]any) {
				liveRules = append(liveRules, v.(string))
			}
			if !slices.Equal(liveRules, c.rules) {
				t.Fatalf("live: %s, dry run said %v", live.Body, c.rules)
			}
		})
	}
	// A dry run of a create decides it and creates nothing.
	r, m := h.evaluate(h.operator, map[string]any{"request": map[string]any{"method": "POST", "path": "/v1/sandboxes",
		"token_claims": map[string]any{"role": "agent", "sub": "ci"}, "body": map[string]any{"profile": "workspace"}}})
	if m == nil || m["allow"] != true {
		t.Fatalf("dry run of a create: %d %s", r.Status, r.Body)
	}
	after, err := h.st.List(t.Context(), store.Filter{})
	if err != nil || len(after) != len(before) {
		t.Fatalf("a dry run changed the store: %d records, was %d (%v)", len(after), len(before), err)
	}
	// The input form.
	r, m = h.evaluate(h.operator, map[string]any{"entrypoint": "authz", "input": map[string]any{}})
	if m == nil || m["allow"] != false || !slices.Contains(ruleIDsOf(m), "INPUT") {
		t.Fatalf("dry run of an empty input: %d %s", r.Status, r.Body)
	}
	// Bad forms are 400s naming the field; a path no route matches is a 422.
	for name, c := range map[string]struct {
		body   any
		status int
		field  string
	}{
		"both forms":       {map[string]any{"entrypoint": "authz", "input": map[string]any{}, "request": map[string]any{}}, 400, "request"},
		"an unknown field": {map[string]any{"entrypoint": "authz", "inputs": map[string]any{}}, 400, "body"},
		"no entrypoint":    {map[string]any{"input": map[string]any{}}, 400, "entrypoint"},
		"no input":         {map[string]any{"entrypoint": "authz"}, 400, "input"},
		"an input array":   {map[string]any{"entrypoint": "authz", "input": []any{}}, 400, "input"},
		"no claims":        {map[string]any{"request": map[string]any{"method": "GET", "path": "/v1/sandboxes"}}, 400, "request.token_claims"},
		"a body on a GET":  {map[string]any{"request": map[string]any{"method": "GET", "path": "/v1/sandboxes", "token_claims": map[string]any{"role": "agent"}, "body": map[string]any{"x": 1}}}, 400, "request.body"},
		"an unknown body":  {map[string]any{"request": map[string]any{"method": "POST", "path": "/v1/sandboxes", "token_claims": map[string]any{"role": "agent"}, "body": map[string]any{"profle": "x"}}}, 400, "profle"},
		"no route":         {map[string]any{"request": map[string]any{"method": "GET", "path": "/v1/nothing", "token_claims": map[string]any{"role": "agent"}}}, 422, ""},
	} {
		r := h.gw.Do(http.MethodPost, "/v1/policy/evaluate", h.operator, c.body)
		if r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", name, r.Status, r.Body, c.status)
			continue
		}
		if c.field != "" {
			if f := r.JSON(t)["field"]; f != c.field {
				t.Errorf("%s: field %v, want %s: %s", name, f, c.field, r.Body)
			}
		}
	}
	// Only operators (and reviewers) dry-run.
	if r := h.gw.Do(http.MethodPost, "/v1/policy/evaluate", agent, map[string]any{"entrypoint": "authz", "input": map[string]any{}}); r.Status != http.StatusForbidden {
		t.Fatalf("an agent's dry run: %d %s", r.Status, r.Body)
	}
}

// A candidate bundle uploaded to POST /v1/policy/replay is replayed
// against the gateway's own log: a refused exec timeout that the
// candidate allows is a deny→allow flip.
func TestACandidateIsReplayedAgainstTheGatewaysLog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{logInputs: true})
	agent := h.mint(token.RoleAgent, "ci")
	id, session := h.gw.Create(agent, nil).IDToken()
	if r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"sleep", "1"}, "timeout_seconds": 600}); r.Status != http.StatusForbidden {
		t.Fatalf("an exec past the bound: %d %s", r.Status, r.Body)
	}
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	found := false
	policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		found = strings.Contains(string(b), `"max_timeout_seconds": 120`)
		return []byte(strings.Replace(string(b), `"max_timeout_seconds": 120`, `"max_timeout_seconds": 86400`, 1))
	}, &found)
	var bundle bytes.Buffer
	if _, err := policies.Build(t.Context(), policies.BuildOptions{Dir: dir, Revision: "candidate-1"}, &bundle); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url+"/v1/policy/replay", bytes.NewReader(bundle.Bytes()))
	req.Header.Set("Authorization", "Bearer "+h.operator)
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var rep struct {
		CandidateRevision string         `json:"candidate_revision"`
		Replayed          int            `json:"replayed"`
		Flips             map[string]int `json:"flips"`
		Groups            []struct {
			Kind, Rule string
			Count      int
		} `json:"groups"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &rep) != nil {
		t.Fatalf("replay: %d %s", resp.StatusCode, raw)
	}
	if rep.CandidateRevision != "candidate-1" || rep.Replayed < 3 || rep.Flips["deny_to_allow"] != 1 ||
		len(rep.Groups) != 1 || rep.Groups[0].Rule != "E2" || rep.Groups[0].Kind != "deny_to_allow" {
		t.Fatalf("replay report: %s", raw)
	}
	// A body that is no bundle is a 422; an agent may not replay.
	if r := h.gw.Do(http.MethodPost, "/v1/policy/replay", h.operator, map[string]any{"not": "a bundle"}); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a body that is no bundle: %d %s", r.Status, r.Body)
	}
	if r := h.gw.Do(http.MethodPost, "/v1/policy/replay", agent, map[string]any{}); r.Status != http.StatusForbidden {
		t.Fatalf("an agent's replay: %d %s", r.Status, r.Body)
	}
}

// A rule in warn mode allows the request and says why in a Warning header
// and a warnings member; the decision log keeps it with its mode, and the
// rule's mode shows in GET /v1/policy.
func TestAWarnModeRuleAllowsAndSaysSo(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	found := false
	policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		found = strings.Contains(string(b), `"enforcement": {}`)
		return []byte(strings.Replace(string(b), `"enforcement": {}`, `"enforcement": {"E1": "warn", "E3": "dryrun"}`, 1))
	}, &found)
	h := newHarness(t, harnessOptions{policyDir: dir, logInputs: true})
	agent := h.mint(token.RoleAgent, "ci")
	id, session := h.gw.Create(agent, nil).IDToken()
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"-x"}})
	if r.Status != http.StatusOK {
		t.Fatalf("an exec E1 warns about: %d %s", r.Status, r.Body)
	}
	if w := r.Header.Get("Warning"); !strings.HasPrefix(w, `299 sandgate "E1: `) {
		t.Fatalf("Warning header %q", w)
	}
	m := r.JSON(t)
	ws, _ := m["warnings"].([]any)
	if len(ws) != 1 || ws[0].(map[string]any)["rule"] != "E1" || ws[0].(map[string]any)["mode"] != "warn" || m["exit_code"] == nil {
		t.Fatalf("the exec answer: %s", r.Body)
	}
	// dryrun: allowed, nothing said to the caller, logged. E3 bounds
	// tail_bytes to exec.max_logs_tail_bytes (65536); the dry run lets a
	// longer tail through.
	r = h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs?tail_bytes=70000", session, nil)
	if r.Status != http.StatusOK || r.Header.Get("Warning") != "" || r.Header.Get("X-Sandgate-Stream") != "stdout" {
		t.Fatalf("a dry-run violation reached the caller: %d %v %s", r.Status, r.Header, r.Body)
	}
	// The policy lets an unknown stream through too; the handler, which
	// only adds refusals, does not pass it to Nomad.
	r = h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs?stream=env", session, nil)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "stream") {
		t.Fatalf("logs of an unknown stream under a dry-run E3: %d %s", r.Status, r.Body)
	}
	got := h.gw.Do(http.MethodGet, "/v1/decisions?rule=E3", h.operator, nil).JSON(t)
	ds, _ := got["decisions"].([]any)
	if len(ds) != 2 {
		t.Fatalf("the dry-run decisions in the log: %v", got)
	}
	d := ds[0].(map[string]any)
	v := d["violations"].([]any)[0].(map[string]any)
	if d["allow"] != true || v["rule"] != "E3" || v["mode"] != "dryrun" {
		t.Fatalf("the dry-run decision: %v", d)
	}
	pol := h.gw.Do(http.MethodGet, "/v1/policy", h.operator, nil).JSON(t)
	modes := map[string]string{}
	for _, r := range pol["rules"].([]any) {
		rm := r.(map[string]any)
		if rm["entrypoint"] == "authz" {
			modes[rm["id"].(string)] = rm["mode"].(string)
		}
	}
	if modes["E1"] != "warn" || modes["E3"] != "dryrun" || modes["T2"] != "deny" {
		t.Fatalf("modes in GET /v1/policy: %v", modes)
	}
}

// A reviewer token reads the policy and the decision log and dry-runs and
// replays; every other route refuses it with T2, and it changes nothing.
func TestAReviewerReadsAndDryRunsAndIsRefusedEverythingElse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint(token.RoleAgent, "ci")
	id := h.gw.Create(agent, nil).ID
	reviewer := h.mint(token.RoleReviewer, "sec-team")
	allowed := map[string]bool{
		"GET /v1/policy": true, "GET /v1/decisions": true,
		"POST /v1/policy/evaluate": true, "POST /v1/policy/replay": true,
	}
	bodies := map[string]any{
		"POST /v1/policy/evaluate": map[string]any{"request": map[string]any{"method": "DELETE", "path": "/v1/sandboxes/" + id, "token_claims": map[string]any{"role": "agent", "sub": "ci"}}},
	}
	walked := 0
	for _, rt := range h.srv.Echo().Routes() {
		if !strings.HasPrefix(rt.Path, "/v1/") || rt.Path == "/v1/capabilities" {
			continue
		}
		key := rt.Method + " " + rt.Path
		path := strings.NewReplacer(":id", id, ":node", "worker-1", ":jti", "01JNOSUCHTOKEN").Replace(rt.Path)
		body, ok := bodies[key]
		if !ok && (rt.Method == http.MethodPost || rt.Method == http.MethodPut) {
			body = map[string]any{}
		}
		r := h.gw.Do(rt.Method, path, reviewer, body)
		walked++
		if allowed[key] {
			if r.Status == http.StatusForbidden || r.Status == http.StatusUnauthorized {
				t.Errorf("%s as a reviewer: %d %s", key, r.Status, r.Body)
			}
			continue
		}
		if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), `"T2"`) {
			t.Errorf("%s as a reviewer: %d %s, want 403 T2", key, r.Status, r.Body)
		}
	}
	if walked < 15 {
		t.Fatalf("only %d routes walked", walked)
	}
	// The dry run of the agent's destroy said allow, and destroyed nothing.
	if rec, err := h.st.Get(t.Context(), id); err != nil || !rec.State.Live() {
		t.Fatalf("the sandbox after a reviewer's dry run: %+v %v", rec, err)
	}
	// The reviewer's own principal is recorded, and it can be minted through the API.
	r := h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, map[string]any{"role": "reviewer", "ttl_seconds": 3600, "label": "audit week"})
	if r.Status != http.StatusCreated {
		t.Fatalf("mint a reviewer token: %d %s", r.Status, r.Body)
	}
}
