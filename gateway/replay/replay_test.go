package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sandgate/gateway"
	"sandgate/gateway/audit"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/replay"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/policies/policytest"
)

// traffic runs a little real traffic through an in-process gateway that
// logs inputs, and returns its decision log: allowed creates and execs,
// and refusals of T2 (a session token listing), E1 (an option as the
// program), E2 (a timeout past the bound).
func traffic(t *testing.T) string {
	t.Helper()
	gw := gatewaytest.New(t, gatewaytest.Options{Config: func(c *gateway.Config) { c.LogInputs = true }})
	agent := gw.Mint(token.RoleAgent, "ci")
	do := func(method, path, tok string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(context.Background(), method, gw.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, m
	}
	code, sbx := do(http.MethodPost, "/v1/sandboxes", agent, map[string]any{})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, sbx)
	}
	id, session := sbx["id"].(string), sbx["token"].(string)
	for _, c := range []struct {
		method, path, tok string
		body              any
		want              int
	}{
		{http.MethodPost, "/v1/sandboxes/" + id + "/exec", session, map[string]any{"argv": []string{"echo", "hello", "world"}}, http.StatusOK},
		{http.MethodPost, "/v1/sandboxes/" + id + "/exec", session, map[string]any{"argv": []string{"echo", "hi"}}, http.StatusOK},
		{http.MethodGet, "/v1/sandboxes", session, nil, http.StatusForbidden},
		{http.MethodPost, "/v1/sandboxes/" + id + "/exec", session, map[string]any{"argv": []string{"-rf", "/"}}, http.StatusForbidden},
		{http.MethodPost, "/v1/sandboxes/" + id + "/exec", session, map[string]any{"argv": []string{"sleep", "1"}, "timeout_seconds": 600}, http.StatusForbidden},
		{http.MethodPost, "/v1/sandboxes/" + id + "/exec", session, map[string]any{"argv": []string{"sleep", "1"}, "timeout_seconds": 900}, http.StatusForbidden},
	} {
		if code, m := do(c.method, c.path, c.tok, c.body); code != c.want {
			t.Fatalf("%s %s: %d, want %d: %v", c.method, c.path, code, c.want, m)
		}
	}
	return filepath.Join(gw.DataDir, gatewaytest.DecisionLogFile)
}

func replayFile(t *testing.T, candidate policies.Decider, file string) replay.Report {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := replay.New(candidate, replay.Options{})
	if _, err := audit.ReadFile(f, func(e audit.Entry) error { return r.Add(context.Background(), e) }); err != nil {
		t.Fatal(err)
	}
	return r.Report()
}

func engine(t *testing.T, dir string) *policies.Engine {
	t.Helper()
	e, err := policies.New(context.Background(), policies.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// editData copies the embedded bundle with one data.json text replaced.
func editData(t *testing.T, old, new string) string {
	t.Helper()
	return policytest.Copy(t, policies.EmbeddedBundle(), func(p string, b []byte) ([]byte, error) {
		if p != "data.json" {
			return b, nil
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("data.json has no %s", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1), nil
	})
}

func TestReplayUnderTheBundleThatDecidedFlipsNothing(t *testing.T) {
	t.Parallel()
	log := traffic(t)
	same, err := gatewaytest.SharedEngine()
	if err != nil {
		t.Fatal(err)
	}
	rep := replayFile(t, same, log)
	if rep.Replayed < 8 || rep.Unchanged != rep.Replayed || len(rep.Groups) != 0 || rep.Loosens() || len(rep.Skipped) != 0 {
		t.Fatalf("replay under the same bundle: %+v", rep)
	}
}

func TestReplayFindsAPlantedLoosening(t *testing.T) {
	t.Parallel()
	log := traffic(t)
	// The planted change: exec timeouts up to a day, and at most two
	// arguments. The first frees the two refused long execs; the second
	// refuses the allowed three-word echo.
	dir := editData(t, `"max_timeout_seconds": 120`, `"max_timeout_seconds": 86400`)
	dir = policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"max_args": 256`), []byte(`"max_args": 2`), 1)
	}, nil)
	rep := replayFile(t, engine(t, dir), log)
	if !rep.Loosens() || rep.Flips[replay.DenyToAllow] != 2 || rep.Flips[replay.AllowToDeny] != 1 {
		t.Fatalf("flips %v, want 2 deny→allow and 1 allow→deny: %+v", rep.Flips, rep)
	}
	first := rep.Groups[0]
	if first.Kind != replay.DenyToAllow || first.Rule != "E2" || first.Count != 2 || len(first.Examples) != 2 {
		t.Fatalf("the first group: %+v, want deny→allow E2 ×2", first)
	}
	var table strings.Builder
	table.WriteString("| flip | rule | count | example decision ids |\n|---|---|---|---|\n")
	for _, g := range rep.Groups {
		table.WriteString("| " + g.Kind + " | " + g.Rule + " | " + strconv.Itoa(g.Count) + " | " + strings.Join(g.Examples, ", ") + " |\n")
	}
	t.Logf("replayed %d (unchanged %d) under %s:\n%s", rep.Replayed, rep.Unchanged, rep.CandidateRevision, table.String())
}

func TestDecisionsWithoutAnInputAreSkippedAndCounted(t *testing.T) {
	t.Parallel()
	same, err := gatewaytest.SharedEngine()
	if err != nil {
		t.Fatal(err)
	}
	r := replay.New(same, replay.Options{Limit: 1})
	ctx := context.Background()
	for _, e := range []audit.Entry{
		{Entrypoint: "authz"},
		{Entrypoint: "authz", Error: "boom", Input: json.RawMessage(`{}`)},
		{Entrypoint: "nope", Input: json.RawMessage(`{}`)},
		{Entrypoint: "authz", Input: json.RawMessage(`[1]`)},
	} {
		if err := r.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Add(ctx, audit.Entry{Entrypoint: "authz", Allow: false, RuleIDs: []string{"INPUT", "T2", "T3", "T4"}, Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ctx, audit.Entry{Entrypoint: "authz", Input: json.RawMessage(`{}`)}); !errors.Is(err, replay.ErrLimit) {
		t.Fatalf("past the limit: %v", err)
	}
	rep := r.Report()
	if rep.Skipped["no_input"] != 1 || rep.Skipped["logged_error"] != 1 || rep.Skipped["unknown_entrypoint"] != 1 || rep.Skipped["bad_input"] != 1 || !rep.Truncated || rep.Replayed != 1 {
		t.Fatalf("report: %+v", rep)
	}
}
