package attack

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
)

// The body a policy judges must be the body the gateway acts on: key case
// and duplicate keys resolve once, by the decoder, before the decision,
// and a field the policy does not know is refused, not ignored.

func post(path, body string) apitest.Request {
	return apitest.Request{Method: http.MethodPost, Path: path, Body: body}
}

const (
	createPath = "/v1/sandboxes"
	execA1     = "/v1/sandboxes/{a1}/exec"
	extendA1   = "/v1/sandboxes/{a1}/extend"
	mintPath   = "/v1/tokens"
)

func bodyCases(*testing.T, *world) []attack {
	deny := func(name string, rq apitest.Request, as string, rules ...string) attack {
		return attack{name: name, req: rq, as: as, status: 403, code: "policy_denied", rules: rules, orInvalid: true}
	}
	bad := func(name string, rq apitest.Request, as, field string) attack {
		return attack{name: name, req: rq, as: as, status: 400, code: "invalid_request", check: field400(field)}
	}
	return []attack{
		deny("an upper-case ARGV key carries an option as the program", post(execA1, `{"ARGV":["-rf","/"]}`), "sess:a1", "E1"),
		deny("a mixed-case duplicate of argv overrides a harmless one", post(execA1, `{"argv":["echo","ok"],"Argv":["-rf"]}`), "sess:a1", "E1"),
		deny("a duplicate argv key overrides a harmless one", post(execA1, `{"argv":["echo","ok"],"argv":["--help"]}`), "sess:a1", "E1"),
		deny("an Image key in title case names a foreign image", post(createPath, `{"Image":"evil.example/root:latest"}`), "agentA", "H11"),
		deny("an IMAGE duplicate overrides an allowed image", post(createPath, `{"image":"ubuntu:24.04","IMAGE":"evil:latest"}`), "agentA", "H11"),
		deny("a PROFILE duplicate asks for an unknown profile", post(createPath, `{"profile":"strict","PROFILE":"privileged"}`), "agentA", "INPUT"),
		deny("a Network duplicate asks for host networking", post(createPath, `{"network":"none","Network":"host"}`), "agentA", "INPUT"),
		deny("a Role duplicate asks to mint a session token", post(mintPath, `{"role":"agent","ttl_seconds":3600,"Role":"session"}`), "op", "T4"),
		deny("a TTL_SECONDS duplicate asks for a week", post(extendA1, `{"ttl_seconds":600,"TTL_SECONDS":604800}`), "op", "L2"),
		deny("a duplicate quota figure overrides an allowed one", post(mintPath, `{"role":"agent","ttl_seconds":3600,"quota":{"max_live_sandboxes":1,"max_live_sandboxes":1000}}`), "op", "B3"),
		bad("a smuggled stdin_bytes, the policy's own field", post(execA1, `{"argv":["cat"],"stdin_bytes":0,"stdin":"x"}`), "sess:a1", "stdin_bytes"),
		bad("a smuggled env_count, the policy's own field", post(execA1, `{"argv":["env"],"env_count":0}`), "sess:a1", "env_count"),
		bad("a smuggled principal on create", post(createPath, `{"principal":"beta"}`), "agentA", "principal"),
		bad("a smuggled privileged flag on create", post(createPath, `{"privileged":true}`), "agentA", "privileged"),
		bad("a smuggled cap_add on create", post(createPath, `{"profile":"workspace","cap_add":["SYS_ADMIN"]}`), "agentA", "cap_add"),
		bad("a smuggled volume on create", post(createPath, `{"volumes":["/:/host"]}`), "agentA", "volumes"),
		bad("a smuggled runtime on create", post(createPath, `{"runtime":"runc","security_opt":["seccomp=unconfined"]}`), "agentA", "runtime"),
		bad("a smuggled job_id on create", post(createPath, `{"job_id":"nomad-core"}`), "agentA", "job_id"),
		bad("smuggled scopes on a mint", post(mintPath, `{"role":"agent","ttl_seconds":3600,"scopes":["extend","hosts:write"]}`), "op", "scopes"),
		bad("a smuggled sandbox_id on a mint", post(mintPath, `{"role":"agent","ttl_seconds":3600,"sandbox_id":"{a1}"}`), "op", "sandbox_id"),
		bad("a smuggled __proto__ member", post(execA1, `{"argv":["true"],"__proto__":{"admin":true}}`), "sess:a1", "__proto__"),
		bad("a smuggled expires_at on extend", post(extendA1, `{"ttl_seconds":600,"expires_at":"2999-01-01T00:00:00Z"}`), "op", "expires_at"),
		bad("a second JSON object after the first", post(execA1, `{"argv":["echo"]}{"argv":["-rf"]}`), "sess:a1", "body"),
		bad("trailing garbage after the object", post(execA1, `{"argv":["echo"]} rm -rf /`), "sess:a1", "body"),
		bad("an array instead of an object", post(execA1, `[{"argv":["echo"]}]`), "sess:a1", "body"),
		bad("a byte-order mark before the object", post(execA1, "\ufeff"+`{"argv":["echo"]}`), "sess:a1", "body"),
		bad("a JavaScript comment in the body", post(execA1, `{"argv":["echo"] /* ,"argv":["-rf"] */}`), "sess:a1", "body"),
		bad("argv as one shell string", post(execA1, `{"argv":"rm -rf /"}`), "sess:a1", "argv"),
		bad("argv holding numbers", post(execA1, `{"argv":["echo",1,2]}`), "sess:a1", "argv"),
		bad("labels with a key that is not a label", post(createPath, `{"labels":{"Bad Key":"x"}}`), "agentA", "labels"),
		bad("seventeen labels", post(createPath, labels(17)), "agentA", "labels"),
		{name: "a JSON null body on exec names no program", req: post(execA1, `null`), as: "sess:a1", status: 403, code: "policy_denied", rules: []string{"E1"}, orInvalid: true},
		{name: "a body over the 1 MiB limit", req: post(execA1, `{"argv":["echo","`+strings.Repeat("a", 1<<20+16)+`"]}`), as: "sess:a1", status: 413, code: "payload_too_large"},
	}
}

func labels(n int) string {
	var b strings.Builder
	b.WriteString(`{"labels":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// field400 checks that a 400 names the field.
func field400(field string) func(t *testing.T, w *world, r apitest.Reply) {
	return func(t *testing.T, _ *world, r apitest.Reply) {
		if got := r.JSON(t)["field"]; got != field {
			t.Errorf("field %v, want %s: %s", got, field, clip(r.Body))
		}
	}
}

// integerCases: every numeric field of every body and query, at and past
// its bounds, overflowing int64, and spelled as a float, an exponent or a
// string.
func integerCases(*testing.T, *world) []attack {
	type num struct {
		path, as, field, wrap string // wrap: the body around %s, the value
		rules                 []string
		lo, hi                int64
		policy                bool // false: the gateway, not the policy, bounds it (400)
	}
	nums := []num{
		{path: createPath, as: "agentA", field: "ttl_seconds", wrap: `{"ttl_seconds":%s}`, rules: []string{"L2"}, lo: 60, hi: 14400, policy: true},
		{path: createPath, as: "agentA", field: "cpu_mhz", wrap: `{"cpu_mhz":%s}`, rules: []string{"B2"}, lo: 100, hi: 2000, policy: true},
		{path: createPath, as: "agentA", field: "memory_mb", wrap: `{"memory_mb":%s}`, rules: []string{"B2"}, lo: 64, hi: 4096, policy: true},
		{path: createPath, as: "agentA", field: "wait_seconds", wrap: `{"wait_seconds":%s}`, lo: 0, hi: 120},
		{path: execA1, as: "sess:a1", field: "timeout_seconds", wrap: `{"argv":["true"],"timeout_seconds":%s}`, rules: []string{"E2"}, lo: 1, hi: 120, policy: true},
		{path: extendA1, as: "op", field: "ttl_seconds", wrap: `{"ttl_seconds":%s}`, rules: []string{"L2"}, lo: 60, hi: 14400, policy: true},
		{path: mintPath, as: "op", field: "ttl_seconds", wrap: `{"role":"agent","ttl_seconds":%s}`, rules: []string{"T4"}, lo: 60, hi: 31536000, policy: true},
		{path: mintPath, as: "op", field: "quota.max_live_sandboxes", wrap: `{"role":"agent","ttl_seconds":3600,"quota":{"max_live_sandboxes":%s}}`, rules: []string{"B3"}, lo: 1, hi: 100, policy: true},
	}
	var out []attack
	for _, n := range nums {
		route := strings.TrimPrefix(strings.ReplaceAll(n.path, "{a1}", ":id"), "/v1/")
		name := func(what string) string { return fmt.Sprintf("%s %s %s", route, n.field, what) }
		refused := func(what, v string) attack {
			c := attack{name: name(what), req: post(n.path, fmt.Sprintf(n.wrap, v)), as: n.as}
			if n.policy {
				c.status, c.code, c.rules = 403, "policy_denied", n.rules
			} else {
				c.status, c.code, c.check = 400, "invalid_request", field400(n.field)
			}
			return c
		}
		undecodable := func(what, v string) attack {
			return attack{name: name(what), req: post(n.path, fmt.Sprintf(n.wrap, v)), as: n.as, status: 400, code: "invalid_request"}
		}
		out = append(out,
			refused("one below the minimum", fmt.Sprint(n.lo-1)),
			refused("one above the maximum", fmt.Sprint(n.hi+1)),
			refused("at the int64 maximum", "9223372036854775807"),
			refused("at the int64 minimum", "-9223372036854775808"),
			undecodable("past the int64 maximum", "9223372036854775808"),
			undecodable("as a fraction", fmt.Sprint(n.lo)+".5"),
			undecodable("in exponent notation", "1e3"),
			undecodable("as a string", `"`+fmt.Sprint(n.hi)+`"`),
		)
		if n.policy && n.hi < 1<<31 {
			// int32 arithmetic would wrap 2^32+lo back to lo: the bound must hold on the real value.
			out = append(out, refused("wrapping a 32-bit integer to the minimum", fmt.Sprint(int64(1)<<32+n.lo)))
		}
	}
	logs := func(what, q string, status int, code string, rules ...string) attack {
		c := attack{name: "logs tail_bytes " + what, req: apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes/{a1}/logs?" + q}, as: "sess:a1", status: status, code: code}
		if len(rules) > 0 {
			c.rules = rules
		}
		return c
	}
	out = append(out,
		logs("zero", "tail_bytes=0", 403, "policy_denied", "E3"),
		logs("negative", "tail_bytes=-1", 403, "policy_denied", "E3"),
		logs("one above the maximum", "tail_bytes=65537", 403, "policy_denied", "E3"),
		logs("at the int64 maximum", "tail_bytes=9223372036854775807", 403, "policy_denied", "E3"),
		logs("past the int64 maximum", "tail_bytes=9223372036854775808", 400, "invalid_request"),
		logs("in hexadecimal", "tail_bytes=0x10", 400, "invalid_request"),
		logs("in exponent notation", "tail_bytes=1e3", 400, "invalid_request"),
		attack{name: "decisions limit zero", req: apitest.Request{Method: http.MethodGet, Path: "/v1/decisions?limit=0"}, as: "op", status: 400, code: "invalid_request"},
		attack{name: "decisions limit past the most a page holds", req: apitest.Request{Method: http.MethodGet, Path: "/v1/decisions?limit=1001"}, as: "op", status: 400, code: "invalid_request"},
		attack{name: "decisions limit past the int64 maximum", req: apitest.Request{Method: http.MethodGet, Path: "/v1/decisions?limit=99999999999999999999"}, as: "op", status: 400, code: "invalid_request"},
	)
	enroll := func(what, budget string, status int, code string, rules ...string) attack {
		c := attack{
			name: "enrollment budget " + what, req: apitest.Request{Method: http.MethodPut, Path: "/v1/hosts/worker-1/enrollment", Body: `{"budget":` + budget + `}`},
			as: "op", status: status, code: code, nomad: true,
		}
		if len(rules) > 0 {
			c.rules = rules
		}
		return c
	}
	out = append(out,
		enroll("max_sandboxes zero", `{"max_sandboxes":0}`, 403, "policy_denied", "B1"),
		enroll("max_sandboxes above the ceiling", `{"max_sandboxes":1001}`, 403, "policy_denied", "B1"),
		enroll("max_sandboxes negative", `{"max_sandboxes":-1}`, 403, "policy_denied", "B1"),
		enroll("cpu_mhz beyond the node", `{"cpu_mhz":8001}`, 403, "policy_denied", "B1"),
		enroll("memory_mb beyond the node", `{"memory_mb":16385}`, 403, "policy_denied", "B1"),
		enroll("cpu_mhz at the int64 maximum", `{"cpu_mhz":9223372036854775807}`, 403, "policy_denied", "B1"),
		enroll("memory_mb past the int64 maximum", `{"memory_mb":9223372036854775808}`, 400, "invalid_request"),
		enroll("max_sandboxes as a fraction", `{"max_sandboxes":2.5}`, 400, "invalid_request"),
	)
	return out
}
