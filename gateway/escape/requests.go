package escape

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"sandgate/policies"
)

// The request cases: a token asks for what its role, scope or sandbox
// does not give it. Tokens carry the scopes the gateway mints for their
// role under the candidate's own settings, as a real token would.

const (
	auditSandbox = "k7x2m9p4q8r5t1v6"
	otherSandbox = "m3n8b2v7c1x9z4q5"
	auditNow     = 1764406800
)

// request is one dangerous request.
type request struct {
	ID, What, Rule string
	build          func(s policies.Settings) *policies.AuthzInput
}

func requestCases() []Case {
	cases := make([]Case, 0, len(requests))
	for _, r := range requests {
		cases = append(cases, Case{ID: r.ID, What: r.What, Rule: r.Rule, Entrypoint: policies.Authz,
			input: func(s policies.Settings) (any, error) { return r.build(s), nil }})
	}
	return cases
}

func sessionToken(s policies.Settings, sandbox string) *policies.TokenFacts {
	return &policies.TokenFacts{Role: "session", Sub: "session:" + sandbox, Scopes: s.SessionScopes(),
		SandboxID: sandbox, Exp: auditNow + 3600, JTI: "01JDQ8Z6AUDIT", Active: true}
}

func agentToken(s policies.Settings, sub string) *policies.TokenFacts {
	return &policies.TokenFacts{Role: "agent", Sub: sub, Scopes: s.RoleScopes("agent"), Exp: auditNow + 3600, JTI: "01JDQ8Z7AUDIT", Active: true}
}

// record is a live sandbox owned by principal.
func record(s policies.Settings, id, principal string) *policies.SandboxRecord {
	return &policies.SandboxRecord{ID: id, JobID: s.Prefix + id, Principal: principal, State: "running",
		Profile: "strict", Network: "none", Node: "w1", CreatedAt: auditNow - 600, ExpiresAt: auditNow + 3000, CeilingAt: auditNow + 13800}
}

func call(method, route string, params map[string]string) policies.Request {
	return policies.Request{Method: method, Route: route, Params: params}
}

func exec(id string, argv ...string) policies.Request {
	r := call("POST", "/v1/sandboxes/:id/exec", map[string]string{"id": id})
	r.Body.Argv = argv
	return r
}

// files is a files request for path as given (raw) and as the gateway
// normalised it.
func files(method, id, raw, normalised string) policies.Request {
	r := call(method, "/v1/sandboxes/:id/files", map[string]string{"id": id})
	r.Query.Path = &raw
	r.File = &policies.FileRequest{Path: normalised}
	return r
}

func ptr[T any](v T) *T { return &v }

var requests = []request{
	{ID: "request/session-token-execs-in-another-sandbox", What: "a session token runs a command in a sandbox it is not bound to", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: exec(otherSandbox, "id"), Token: sessionToken(s, auditSandbox), Sandbox: record(s, otherSandbox, "agent:ci")}
		}},
	{ID: "request/session-token-creates-a-sandbox", What: "a session token creates a sandbox", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: call("POST", "/v1/sandboxes", nil), Token: sessionToken(s, auditSandbox)}
		}},
	{ID: "request/session-token-lists-sandboxes", What: "a session token lists every sandbox", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: call("GET", "/v1/sandboxes", nil), Token: sessionToken(s, auditSandbox)}
		}},
	{ID: "request/session-token-with-a-create-scope", What: "a session token whose claims carry sandboxes:create", Rule: "T1",
		build: func(s policies.Settings) *policies.AuthzInput {
			tok := sessionToken(s, auditSandbox)
			tok.Scopes = append(tok.Scopes, "sandboxes:create")
			return &policies.AuthzInput{Now: auditNow, Request: exec(auditSandbox, "id"), Token: tok, Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/session-token-without-a-sandbox", What: "a session token bound to no sandbox", Rule: "T1",
		build: func(s policies.Settings) *policies.AuthzInput {
			tok := sessionToken(s, auditSandbox)
			tok.SandboxID = ""
			return &policies.AuthzInput{Now: auditNow, Request: call("GET", "/v1/sandboxes/:id", map[string]string{"id": auditSandbox}), Token: tok, Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/agent-execs-in-another-principals-sandbox", What: "an agent runs a command in another agent's sandbox", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: exec(otherSandbox, "id"), Token: agentToken(s, "ci"), Sandbox: record(s, otherSandbox, "agent:other-team")}
		}},
	{ID: "request/agent-with-an-operators-subject-destroys-its-sandbox", What: "an agent token minted with an operator's subject destroys the operator's sandbox", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: call("DELETE", "/v1/sandboxes/:id", map[string]string{"id": otherSandbox}),
				Token: agentToken(s, "alice"), Sandbox: record(s, otherSandbox, "operator:alice")}
		}},
	{ID: "request/agent-extends-its-sandbox", What: "an agent extends its own sandbox's lifetime", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := call("POST", "/v1/sandboxes/:id/extend", map[string]string{"id": auditSandbox})
			r.Body.TTLSeconds = ptr[int64](3600)
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/agent-enrolls-a-host", What: "an agent enrolls a host", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: call("PUT", "/v1/hosts/:node/enrollment", map[string]string{"node": "control-1"}), Token: agentToken(s, "ci")}
		}},
	{ID: "request/agent-mints-an-operator-token", What: "an agent mints an operator token", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := call("POST", "/v1/tokens", nil)
			r.Body.Role, r.Body.TTLSeconds = ptr("operator"), ptr[int64](3600)
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci")}
		}},
	{ID: "request/agent-reads-the-decision-log", What: "an agent reads the decision log", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: call("GET", "/v1/decisions", nil), Token: agentToken(s, "ci")}
		}},
	{ID: "request/an-expired-token", What: "a token past its exp", Rule: "T3",
		build: func(s policies.Settings) *policies.AuthzInput {
			tok := agentToken(s, "ci")
			tok.Exp = auditNow - 1
			return &policies.AuthzInput{Now: auditNow, Request: call("GET", "/v1/sandboxes", nil), Token: tok}
		}},
	{ID: "request/a-revoked-token", What: "a token the store no longer holds as active", Rule: "T4",
		build: func(s policies.Settings) *policies.AuthzInput {
			tok := agentToken(s, "ci")
			tok.Active = false
			return &policies.AuthzInput{Now: auditNow, Request: call("GET", "/v1/sandboxes", nil), Token: tok}
		}},
	{ID: "request/a-route-nobody-added-to-the-policy", What: "a route that is not in the route table", Rule: "T2",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: call("POST", "/v1/admin/exec", nil), Token: agentToken(s, "ci")}
		}},
	{ID: "request/destroy-of-a-job-without-the-prefix", What: "destroy aimed at a record whose job is not sandgate's", Rule: "H9",
		build: func(s policies.Settings) *policies.AuthzInput {
			rec := record(s, auditSandbox, "agent:ci")
			rec.JobID = "billing-api"
			return &policies.AuthzInput{Now: auditNow, Request: call("DELETE", "/v1/sandboxes/:id", map[string]string{"id": auditSandbox}), Token: agentToken(s, "ci"), Sandbox: rec}
		}},
	{ID: "request/exec-with-an-option-as-the-program", What: "exec whose argv[0] is an option of the exec wrapper", Rule: "E1",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: exec(auditSandbox, "--privileged", "sh"), Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/exec-in-a-workdir-climbing-out-of-the-workspace", What: "exec whose workdir climbs out of /workspace with ..", Rule: "E1",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := exec(auditSandbox, "cat", "shadow")
			r.Body.Workdir = ptr("/workspace/../etc")
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/exec-in-a-workdir-outside-the-roots", What: "exec whose workdir is outside every exec.workdir_roots entry", Rule: "E1",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := exec(auditSandbox, "ls")
			r.Body.Workdir = ptr("/etc")
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/read-a-file-outside-the-roots", What: "a file read of /etc/shadow, outside files.roots", Rule: "F1",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: files("GET", auditSandbox, "/etc/shadow", "/etc/shadow"), Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/read-a-file-climbing-out-of-the-workspace", What: "a file read whose path climbs out of /workspace with ..", Rule: "F1",
		build: func(s policies.Settings) *policies.AuthzInput {
			return &policies.AuthzInput{Now: auditNow, Request: files("GET", auditSandbox, "/workspace/../etc/shadow", "/etc/shadow"), Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/replace-a-files-root", What: "a file write that replaces /workspace itself", Rule: "F1",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := files("PUT", auditSandbox, "/workspace", "/workspace")
			r.File.Bytes = ptr[int64](1)
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/write-a-setuid-file", What: "a file write with the setuid bit (mode 4755)", Rule: "F2",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := files("PUT", auditSandbox, "/workspace/tool", "/workspace/tool")
			r.File.Bytes, r.File.Mode = ptr[int64](1), ptr[int64](0o4755)
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/write-a-file-larger-than-the-bound", What: "a file write one byte over files.max_write_bytes", Rule: "F2",
		build: func(s policies.Settings) *policies.AuthzInput {
			r := files("PUT", auditSandbox, "/workspace/big", "/workspace/big")
			r.File.Bytes = ptr(s.Files.MaxWriteBytes + 1)
			return &policies.AuthzInput{Now: auditNow, Request: r, Token: agentToken(s, "ci"), Sandbox: record(s, auditSandbox, "agent:ci")}
		}},
	{ID: "request/exec-in-an-expired-sandbox", What: "exec in a sandbox past its expiry that the reaper has not reached", Rule: "T3",
		build: func(s policies.Settings) *policies.AuthzInput {
			rec := record(s, auditSandbox, "agent:ci")
			rec.ExpiresAt = auditNow - 1
			return &policies.AuthzInput{Now: auditNow, Request: exec(auditSandbox, "id"), Token: agentToken(s, "ci"), Sandbox: rec}
		}},
}

// toValue turns a case's input into the document the policy reads:
// authz inputs through the gateway's own AuthzInput.Value, admission
// documents through JSON, as `sandgate policy eval` reads them.
func toValue(v any) (ast.Value, error) {
	switch in := v.(type) {
	case *policies.AuthzInput:
		return in.Value(), nil
	case doc:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		return policies.ParseInputBytes(b)
	}
	return nil, fmt.Errorf("escape: an input of type %T", v)
}
