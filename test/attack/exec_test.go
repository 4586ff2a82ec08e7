package attack

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
	"sandgate/render/execwrap"
)

func execBody(v map[string]any) string { return string(mustJSON(v)) }

func manyArgs(n int) []string {
	out := make([]string, n)
	out[0] = "echo"
	for i := 1; i < n; i++ {
		out[i] = "x"
	}
	return out
}

func manyEnv(n int) map[string]string {
	env := map[string]string{}
	for i := range n {
		env[fmt.Sprintf("V%d", i)] = "x"
	}
	return env
}

// ran checks an exec that the gateway allowed: its result is data, with
// the exit code and stdout given.
func ran(exit int, stdout string) func(t *testing.T, w *world, r apitest.Reply) {
	return func(t *testing.T, _ *world, r apitest.Reply) {
		m := r.JSON(t)
		if m["exit_code"] != float64(exit) || (stdout != "" && m["stdout"] != stdout) {
			t.Errorf("exec result %s, want exit %d stdout %q", clip(r.Body), exit, stdout)
		}
	}
}

func execCases(*testing.T, *world) []attack {
	e1 := func(name string, body map[string]any) attack {
		return attack{name: name, req: post(execA1, execBody(body)), as: "sess:a1", status: 403, code: "policy_denied", rules: []string{"E1"}}
	}
	e2 := func(name string, body map[string]any) attack {
		return attack{name: name, req: post(execA1, execBody(body)), as: "sess:a1", status: 403, code: "policy_denied", rules: []string{"E2"}}
	}
	bad := func(name string, body map[string]any, field string) attack {
		return attack{name: name, req: post(execA1, execBody(body)), as: "sess:a1", status: 400, code: "invalid_request", check: field400(field)}
	}
	allowed := func(name string, body map[string]any, exit int, stdout string) attack {
		return attack{name: name, req: post(execA1, execBody(body)), as: "sess:a1", status: 200, nomad: true, check: ran(exit, stdout)}
	}
	wrapper := execwrap.Command{Argv: []string{"echo", "inner"}, Timeout: 1e9, KillAfter: 1e9}.Args()
	return []attack{
		e1("an empty argv", map[string]any{"argv": []string{}}),
		e1("no argv at all", map[string]any{"stdin": "x"}),
		e1("argv null", map[string]any{"argv": nil}),
		e1("an option in program position", map[string]any{"argv": []string{"-c", "id"}}),
		e1("a double-dash option in program position", map[string]any{"argv": []string{"--rcfile=/tmp/x", "sh"}}),
		e1("an empty program name", map[string]any{"argv": []string{"", "id"}}),
		e1("a NUL byte in an argument", map[string]any{"argv": []string{"echo", "ok\x00; rm -rf /"}}),
		e1("a NUL byte in the program name", map[string]any{"argv": []string{"true\x00-rf"}}),
		e1("257 arguments", map[string]any{"argv": manyArgs(257)}),
		e1("an argv of 17 KiB", map[string]any{"argv": []string{"echo", strings.Repeat("a", 17<<10)}}),
		e1("an argv over the byte bound in 4-byte characters", map[string]any{"argv": []string{"echo", strings.Repeat("\U0001F600", 4200)}}),
		e1("stdin over 256 KiB", map[string]any{"argv": []string{"cat"}, "stdin": strings.Repeat("s", 256<<10+1)}),
		e2("65 environment variables", map[string]any{"argv": []string{"env"}, "env": manyEnv(65)}),
		e2("a zero timeout", map[string]any{"argv": []string{"true"}, "timeout_seconds": 0}),
		bad("an assignment in program position", map[string]any{"argv": []string{"LD_PRELOAD=/tmp/x.so", "id"}}, "argv[0]"),
		e1("an environment name with a dash", map[string]any{"argv": []string{"env"}, "env": map[string]string{"BAD-NAME": "x"}}),
		e1("an environment name holding an assignment", map[string]any{"argv": []string{"env"}, "env": map[string]string{"A=B": "x"}}),
		e1("an environment name starting with a digit", map[string]any{"argv": []string{"env"}, "env": map[string]string{"1PATH": "x"}}),
		e1("an environment name of 129 characters", map[string]any{"argv": []string{"env"}, "env": map[string]string{strings.Repeat("A", 129): "x"}}),
		e1("an environment name Nomad gives the task", map[string]any{"argv": []string{"env"}, "env": map[string]string{"NOMAD_SECRETS_DIR": "/tmp"}}),
		e1("an environment name of the gateway's own", map[string]any{"argv": []string{"env"}, "env": map[string]string{"SANDGATE_X": "1"}}),
		e1("an empty environment name", map[string]any{"argv": []string{"env"}, "env": map[string]string{"": "x"}}),
		bad("a NUL byte in an environment value", map[string]any{"argv": []string{"env"}, "env": map[string]string{"X": "a\x00b"}}, "env.X"),
		e1("a relative workdir", map[string]any{"argv": []string{"pwd"}, "workdir": "tmp"}),
		e1("a workdir with a NUL byte", map[string]any{"argv": []string{"pwd"}, "workdir": "/tmp\x00/etc"}),
		e1("a workdir over the vector bound", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace/" + strings.Repeat("d", 16<<10)}),
		e1("a workdir over exec.max_workdir_bytes", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace/" + strings.Repeat("d", 4085)}),
		e1("a workdir climbing out of /workspace", map[string]any{"argv": []string{"cat", "shadow"}, "workdir": "/workspace/../etc"}),
		e1("a workdir that only shares a prefix with /workspace", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspacefoo"}),
		e1("a workdir outside the workdir roots", map[string]any{"argv": []string{"pwd"}, "workdir": "/etc"}),
		e1("the root as the workdir", map[string]any{"argv": []string{"pwd"}, "workdir": "/"}),
		e1("a workdir with a trailing slash", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace/"}),
		e1("a workdir with an empty segment", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace//src"}),
		bad("stdin and stdin_base64 together", map[string]any{"argv": []string{"cat"}, "stdin": "a", "stdin_base64": "YQ=="}, "stdin_base64"),
		bad("stdin_base64 that is not base64", map[string]any{"argv": []string{"cat"}, "stdin_base64": "not base64!"}, "stdin_base64"),
		e1("stdin_base64 over 256 KiB decoded", map[string]any{"argv": []string{"cat"}, "stdin_base64": base64.StdEncoding.EncodeToString(make([]byte, 256<<10+1))}),
		e2("a zero output cap", map[string]any{"argv": []string{"yes"}, "max_output_bytes": 0}),
		e2("an output cap over the bundle's", map[string]any{"argv": []string{"yes"}, "max_output_bytes": 1 << 30}),
		e1("an empty workdir", map[string]any{"argv": []string{"pwd"}, "workdir": ""}),
		allowed("a workdir root /workspace", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace"}, 0, "/workspace\n"),
		allowed("a workdir that does not exist fails the wrapper's cd (125), the command does not run", map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace/src"}, 125, ""),
		allowed("a workdir root itself", map[string]any{"argv": []string{"pwd"}, "workdir": "/tmp"}, 0, "/tmp\n"),
		allowed("a shell line in argv[0] is one program name, not a shell", map[string]any{"argv": []string{"sh -c 'rm -rf /'"}}, 127, ""),
		allowed("shell metacharacters stay arguments", map[string]any{"argv": []string{"echo", "$(id)", ";", "`id`", "&&", "id"}}, 0, "$(id) ; `id` && id\n"),
		allowed("a caller's argv imitating the wrapper is wrapped like any other", map[string]any{"argv": wrapper}, 0, "inner\n"),
	}
}

func logsCases(*testing.T, *world) []attack {
	logs := func(name, q string, status int, code string, rules ...string) attack {
		c := attack{name: name, req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}/logs" + q}, as: "sess:a1", status: status, code: code}
		if len(rules) > 0 {
			c.rules = rules
		}
		return c
	}
	return []attack{
		logs("a stream that is a host path", "?stream=/var/log/nomad.log", 403, "policy_denied", "E3"),
		logs("a stream climbing out of the task", "?stream=..%2F..%2Falloc%2Flogs%2Fother.stdout.0", 403, "policy_denied", "E3"),
		logs("a stream with a NUL suffix", "?stream=stdout%00", 403, "policy_denied", "E3"),
		logs("a stream in upper case", "?stream=STDOUT", 403, "policy_denied", "E3"),
		logs("the task name of another job as the stream", "?stream=sandgate-sbx-{b1}", 403, "policy_denied", "E3"),
		logs("another sandbox's logs through a query id", "?id={b1}&sandbox_id={b1}&tail_bytes=abc", 400, "invalid_request"),
	}
}

// adminCases: operator-level requests the policy or the gateway refuses,
// which must leave hosts and tokens as they are.
func adminCases(*testing.T, *world) []attack {
	hostDeny := func(name string, rq apitest.Request, rules ...string) attack {
		return attack{name: name, req: rq, as: "op", status: 403, code: "policy_denied", rules: rules, nomad: true}
	}
	put := func(node, body string) apitest.Request {
		return apitest.Request{Method: http.MethodPut, Path: "/v1/hosts/" + node + "/enrollment", Body: body}
	}
	state := func(node, body string) apitest.Request { return post("/v1/hosts/"+node+"/state", body) }
	mint := func(name, body string, status int, code string, rules ...string) attack {
		c := attack{name: name, req: post(mintPath, body), as: "op", status: status, code: code}
		if len(rules) > 0 {
			c.rules = rules
		}
		return c
	}
	return []attack{
		hostDeny("enrolling the control-plane node", put("control-1", `{}`), "P2"),
		hostDeny("enrolling a worker for egress without the isolation bundle", put("worker-1", `{"egress":true}`), "I5"),
		hostDeny("an unknown node state", state("worker-1", `{"state":"unleashed"}`), "INPUT"),
		{name: "an unknown budget figure", req: put("worker-1", `{"budget":{"max_sandboxes":5,"gpus":8}}`), as: "op", status: 400, code: "invalid_request", check: field400("gpus")},
		{name: "unenrolling a node with live sandboxes without reclaim", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/hosts/worker-1/enrollment"}, as: "op", status: 409, code: "sandboxes_live", rules: []string{"R2"}, nomad: true},
		{name: "enrolling a node Nomad does not know", req: put("worker-99", `{}`), as: "op", status: 404, code: "host_not_found", nomad: true},
		{name: "a state change on a node that is not enrolled", req: state("control-1", `{"state":"frozen"}`), as: "op", status: 409, code: "host_not_enrolled", nomad: true},
		{name: "creating on the control-plane node", req: post(createPath, `{"node":"control-1"}`), as: "agentA", status: 403, code: "policy_denied", rules: []string{"P2"}, nomad: true},
		mint("minting a session token", `{"role":"session","ttl_seconds":3600}`, 403, "policy_denied", "T4"),
		mint("minting an unknown role", `{"role":"root","ttl_seconds":3600}`, 403, "policy_denied", "T4"),
		mint("minting with a 129-byte label", `{"role":"agent","ttl_seconds":3600,"label":"`+strings.Repeat("l", 129)+`"}`, 403, "policy_denied", "T4"),
		mint("a quota on an operator token", `{"role":"operator","ttl_seconds":3600,"quota":{"max_live_sandboxes":5}}`, 403, "policy_denied", "B3"),
		mint("a subject naming a role", `{"role":"agent","ttl_seconds":3600,"subject":"operator:ops"}`, 403, "policy_denied", "T4"), // the policy decides the subject (T4, tokens.subject_pattern)
		mint("a subject with a newline", `{"role":"agent","ttl_seconds":3600,"subject":"a\nb"}`, 403, "policy_denied", "T4"),
		mint("a mint without a ttl", `{"role":"agent"}`, 403, "policy_denied", "T4"),
		{name: "revoking a token that does not exist", req: apitest.Request{Method: http.MethodDelete, Path: "/v1/tokens/NOSUCHTOKEN"}, as: "op", status: 404, code: "token_not_found"},
	}
}
