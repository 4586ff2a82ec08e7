// Package gateway is sandgate's REST API: an Echo server whose every
// non-public route runs request id, body limit, JWT authentication and the
// policy's authz decision, in that order, before its handler. Handlers
// drive the sandbox lifecycle (create, status, list, exec, logs, extend,
// destroy) over the store and Nomad; the reaper (L1) and reconciliation
// (L4) run beside them. Errors leave through one HTTPErrorHandler as RFC
// 9457 problem+json; every decision is logged (gateway/audit).
//
// The gateway fails closed: a policy error, an undefined decision, a store
// or decision-log failure, or a Nomad failure refuses the request and
// changes nothing.
//
// The file names are the index (docs/architecture.md draws the map):
//
//   - server.go: Config, New and the route table with each route's
//     middleware; problem.go: the one error handler (RFC 9457).
//   - middleware_*.go: the stages every request passes, in order: hygiene
//     (request id, header and body limits), recover, deadlines, rate
//     limits, authn, authz. metrics.go counts requests and decisions.
//   - route_*.go: one file per surface (sandboxes, create, exec, files,
//     hosts, tokens, policy, decisions, health, openapi, mcp), each with
//     the request body types its handlers decode.
//   - loop.go and loop_*.go: the background work Run schedules: reaper,
//     reconcile, the usage and disk monitor (reclaim, diskquota) and the
//     allocation watch.
//   - decide.go: every policy decision (requests and loops alike);
//     lifecycle.go: ending a sandbox; nodes.go and allocated.go: node
//     facts and placement; requests.go: strict JSON decoding; view.go,
//     warnings.go: what answers carry; context.go: typed request values.
package gateway
