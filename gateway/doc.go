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
package gateway
