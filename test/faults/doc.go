// Package faults runs the whole gateway in-process on the Nomad simulator
// and breaks Nomad under it: slower than the gateway's per-call timeout,
// answering 500, dropping connections, applying a registration but losing
// the answer, a node going down while a sandbox is placed, an allocation
// that never runs, and the Nomad agent (or the node's client) crashing in
// the middle of an exec.
//
// For each fault the caller gets a clear problem+json answer (its status
// and stable code), and once the fault is cleared the gateway's own loops
// (the reaper, reconciliation and the usage monitor, at short intervals)
// leave nothing behind: no budget held by a record that is not live, no
// prefixed job without a live record, no live record without its job, no
// record left starting; and later requests succeed again.
//
// Nomad is reached through a TCP proxy (so that the agent can crash: every
// connection cut, new ones closed at once) in front of a handler that can
// lose the answer of a request it served, or report every allocation as
// pending, in front of the simulator's own injected faults
// (nomadsim.Fault: latency, status, dropped connections).
package faults
