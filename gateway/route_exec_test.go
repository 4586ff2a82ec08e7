package gateway_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/policies/policytest"
)

func TestExecReportsExitsTimeoutsAndTruncationAsData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	exec := func(body map[string]any) map[string]any {
		t.Helper()
		r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, body)
		if r.Status != http.StatusOK {
			t.Fatalf("exec %v: %d %s", body, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	t.Run("a non-zero exit is a 200 with the code", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"sh", "-c", "exit 3"}})
		if m["exit_code"] != float64(3) || m["timed_out"] != false {
			t.Fatalf("%v", m)
		}
	})
	t.Run("stdin reaches the command and is closed", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"cat"}, "stdin": "abc\n"})
		if m["stdout"] != "abc\n" || m["exit_code"] != float64(0) {
			t.Fatalf("%v", m)
		}
	})
	t.Run("stdin_base64 reaches the command as bytes", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"cat"}, "stdin_base64": base64.StdEncoding.EncodeToString([]byte("bin\x01ary\n"))})
		if m["stdout"] != "bin\x01ary\n" || m["exit_code"] != float64(0) {
			t.Fatalf("%v", m)
		}
	})
	t.Run("max_output_bytes caps each stream below the bundle's cap", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"echo", "hello"}, "max_output_bytes": 3})
		if m["stdout"] != "hel" || m["stdout_truncated"] != true || m["stdout_bytes"] != float64(6) {
			t.Fatalf("%v", m)
		}
	})
	t.Run("an env entry reaches the command", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"printenv", "GREETING"}, "env": map[string]string{"GREETING": "hi"}})
		if m["stdout"] != "hi\n" {
			t.Fatalf("%v", m)
		}
	})
	t.Run("a timeout stops the command and says so", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"sleep", "30"}, "timeout_seconds": 1})
		// the wrapper's SIGTERM ends it: 143, as on a real task
		if m["timed_out"] != true || m["exit_code"] != float64(143) {
			t.Fatalf("%v", m)
		}
		if d := m["duration_ms"].(float64); d < 900 || d > 10000 {
			t.Fatalf("duration_ms %v", d)
		}
	})
	t.Run("a command that exits 124 by itself did not time out", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"sh", "-c", "exit 124"}, "timeout_seconds": 5})
		if m["timed_out"] != false || m["exit_code"] != float64(124) {
			t.Fatalf("%v", m)
		}
	})
	t.Run("output beyond 64 KiB is cut and flagged", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"yes"}})
		if m["stdout_truncated"] != true || m["truncated"] != true || len(m["stdout"].(string)) != 65536 || m["stdout_bytes"].(float64) <= 65536 {
			t.Fatalf("truncated=%v len=%d total=%v", m["stdout_truncated"], len(m["stdout"].(string)), m["stdout_bytes"])
		}
	})
	t.Run("env and workdir are applied to the command only", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"printenv", "GREETING"}, "env": map[string]string{"GREETING": "hello"}, "workdir": "/workspace"})
		if m["stdout"] != "hello\n" {
			t.Fatalf("%v", m)
		}
		m = exec(map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace"})
		if m["stdout"] != "/workspace\n" {
			t.Fatalf("%v", m)
		}
	})
	t.Run("an unknown command is exit 127 as data", func(t *testing.T) {
		m := exec(map[string]any{"argv": []string{"no-such-command-xyz"}})
		if m["exit_code"] != float64(127) {
			t.Fatalf("%v", m)
		}
	})
}

func TestExecRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	path := "/v1/sandboxes/" + id + "/exec"
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, map[string]any{"argv": []string{"-rf"}}), http.StatusForbidden, "policy_denied", "E1")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, map[string]any{"argv": []string{}}), http.StatusForbidden, "policy_denied", "E1")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, map[string]any{"argv": []string{"true"}, "timeout_seconds": 121}), http.StatusForbidden, "policy_denied", "E2")
	m := apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":"echo hi"}`), http.StatusBadRequest, "invalid_request")
	if m["field"] != "argv" {
		t.Fatalf("400 does not name argv: %v", m)
	}
	m = apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["true"],"shell":true}`), http.StatusBadRequest, "invalid_request")
	if m["field"] != "shell" {
		t.Fatalf("400 does not name the unknown field: %v", m)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["true"]`), http.StatusBadRequest, "invalid_request")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, ``), http.StatusBadRequest, "invalid_request")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["true"]} {}`), http.StatusBadRequest, "invalid_request")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["true"],"env":{"BAD NAME":"x"}}`), http.StatusForbidden, "policy_denied", "E1")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["true"],"env":{"NOMAD_TOKEN":"x"}}`), http.StatusForbidden, "policy_denied", "E1")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["cat"],"stdin":"a","stdin_base64":"YQ=="}`), http.StatusBadRequest, "invalid_request")
	big := `{"argv":["true"],"stdin":"` + strings.Repeat("a", 2<<20) + `"}`
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, big), http.StatusRequestEntityTooLarge, "payload_too_large")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs?tail_bytes=lots", session, nil), http.StatusBadRequest, "invalid_request")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/logs?stream=/etc/passwd", session, nil), http.StatusForbidden, "policy_denied", "E3")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/abcdefgh12345678", h.operator, nil), http.StatusNotFound, "sandbox_not_found")
}

// What the exec wrapper cannot carry (an env name with '=' or a NUL) is
// refused by the gateway even under a bundle whose env_name_pattern lets
// every name through: Go only adds refusals.
func TestExecRefusesAnEnvNameTheWrapperCannotCarryWhateverThePolicy(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	found := false
	policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		old := `"env_name_pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}$"`
		found = strings.Contains(string(b), old)
		return []byte(strings.Replace(string(b), old, `"env_name_pattern": ".*"`, 1))
	}, &found)
	h := newHarness(t, harnessOptions{policyDir: dir})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	path := "/v1/sandboxes/" + id + "/exec"
	m := apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, path, session, `{"argv":["env"],"env":{"A=B":"x"}}`), http.StatusBadRequest, "invalid_request")
	if m["field"] != "env" {
		t.Fatalf("the 400 does not name env: %v", m)
	}
	if r := h.gw.Do(http.MethodPost, path, session, `{"argv":["printenv","BAD-NAME"],"env":{"BAD-NAME":"x"}}`); r.Status != http.StatusOK {
		t.Fatalf("a name the loosened bundle allows: %d %s", r.Status, r.Body)
	}
}

func TestExecOnASandboxThatIsNotRunningIs409(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{simConfig: func(c *nomadsim.Config) { c.RunDelay = time.Minute }})
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
	if r.Status != http.StatusCreated {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	if m["state"] != "starting" {
		t.Fatalf("state %v, want starting", m["state"])
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+m["id"].(string)+"/exec", m["token"].(string), map[string]any{"argv": []string{"true"}}), http.StatusConflict, "sandbox_not_running")
}
