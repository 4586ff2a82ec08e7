package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"sandgate/gateway/wire"
)

// ListHosts is GET /v1/hosts (operators): every node, ordered by name.
func (c *Client) ListHosts(ctx context.Context) ([]Host, error) {
	var out wire.HostList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/hosts", out: &out}); err != nil {
		return nil, err
	}
	return out.Hosts, nil
}

// Enroll is PUT /v1/hosts/{node}/enrollment (operators). The policy
// decides (P2, I5, B1); a refusal is a *Problem that Denied() reports.
func (c *Client) Enroll(ctx context.Context, node string, req EnrollRequest) (Host, error) {
	var out Host
	seg, err := segment("node", node)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, request{method: http.MethodPut, path: "/v1/hosts/" + seg + "/enrollment", in: req, out: &out})
	return out, err
}

// Unenroll is DELETE /v1/hosts/{node}/enrollment (operators). A node with
// live sandboxes is refused (409, R2) unless reclaim destroys them first.
func (c *Client) Unenroll(ctx context.Context, node string, reclaim bool) (HostChange, error) {
	var out HostChange
	seg, err := segment("node", node)
	if err != nil {
		return out, err
	}
	r := request{method: http.MethodDelete, path: "/v1/hosts/" + seg + "/enrollment", out: &out}
	if reclaim {
		r.query = url.Values{"reclaim": {"true"}}
	}
	err = c.do(ctx, r)
	return out, err
}

// SetHostState is POST /v1/hosts/{node}/state (operators): one of the
// Host* states. Draining reclaims the node's sandboxes first (R2).
func (c *Client) SetHostState(ctx context.Context, node, state string) (HostChange, error) {
	var out HostChange
	seg, err := segment("node", node)
	if err != nil {
		return out, err
	}
	body := wire.HostStateRequest{State: &state}
	err = c.do(ctx, request{method: http.MethodPost, path: "/v1/hosts/" + seg + "/state", in: body, out: &out})
	return out, err
}

// MintToken is POST /v1/tokens (operators). The answer's Token is the
// secret, shown this once.
func (c *Client) MintToken(ctx context.Context, req MintRequest) (Token, error) {
	var out Token
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tokens", in: req, out: &out})
	return out, err
}

// ListTokens is GET /v1/tokens (operators): operator and agent tokens,
// never their secrets.
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	var out wire.TokenList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tokens", out: &out}); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken is DELETE /v1/tokens/{id} (operators): the token is refused
// from the next request on (T4).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	seg, err := segment("token id", id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/tokens/" + seg})
}

// Decisions is GET /v1/decisions (operators): the gateway's recent policy
// decisions, newest first; limit 0 takes the gateway's default (50).
func (c *Client) Decisions(ctx context.Context, limit int) ([]Decision, error) {
	var out DecisionPage
	r := request{method: http.MethodGet, path: "/v1/decisions", out: &out}
	if limit != 0 {
		r.query = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	if err := c.do(ctx, r); err != nil {
		return nil, err
	}
	return out.Decisions, nil
}

// Policy is GET /v1/policy (operators): the policy bundle in force, with
// every rule a reviewer reads.
func (c *Client) Policy(ctx context.Context) (Policy, error) {
	var out Policy
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/policy", out: &out})
	return out, err
}

// EvaluateRequest dry-runs req on the gateway (POST /v1/policy/evaluate):
// what would the policy decide if this caller sent this. Nothing changes.
func (c *Client) EvaluateRequest(ctx context.Context, req DryRequest) (Evaluation, error) {
	var out Evaluation
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/policy/evaluate", in: wire.EvaluateRequest{Request: &req}, out: &out})
	return out, err
}

// EvaluateInput dry-runs an input document on one entrypoint.
func (c *Client) EvaluateInput(ctx context.Context, entrypoint string, input json.RawMessage) (Evaluation, error) {
	var out Evaluation
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/policy/evaluate", in: wire.EvaluateRequest{Entrypoint: entrypoint, Input: input}, out: &out})
	return out, err
}
