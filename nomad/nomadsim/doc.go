// Package nomadsim is an in-process simulator of the subset of Nomad's HTTP
// API that sandgate's gateway uses: agent, status, nodes (with drain and
// eligibility), client host stats, jobs (register, read, list, summary,
// deregister and purge, validate), evaluations, allocations (and their
// stats), variables with check-and-set, the alloc exec WebSocket and the
// alloc log stream.
//
// It answers with the JSON a real Nomad v1.6.5 agent sends: values are built
// as nomad/api types and reshaped where the server's encoding differs (see
// wire.go), with the agent's status codes, X-Nomad-* headers and error texts.
// The tests replay the wire recordings in testdata/recordings against it.
// It is the project's one test double and also powers the demo mode.
//
// Nothing ever runs on the host. Exec runs only builtin commands written in
// Go (echo, true, false, sleep, cat, a small sh, yes, env, pwd, printenv,
// timeout); see builtins.go for their contract. Any other command fails the
// way a missing executable fails on a real agent.
//
// A Server is safe for concurrent use. Create it with New, serve Handler (or
// call Start, or NewTestServer in tests), point the nodes at the listener
// with SetAddress, and Close it to stop every timer, stream and simulated
// command it started.
//
// # Known deviations from a real agent
//
//   - Scheduling is synchronous: the register evaluation is complete (and
//     allocations exist, pending) when the register call returns. Placement
//     spreads allocations over the least loaded feasible node. Only the
//     constraint operands listed at constraintMatches are understood; any
//     other operand fails its constraint.
//   - Updates are destructive (old allocations stop, new ones are placed);
//     there are no deployments, canaries, reschedules or migrations. A drain
//     with live allocations stays "draining" until they stop or its deadline
//     passes; then they are stopped, not migrated. Allocations of a node that
//     goes down are marked lost and not replaced.
//   - Driver config is checked only where a real client refused it at task
//     start: a docker ulimit or labels that is not a list (the driver wants
//     list(map(string))) fails the task with the client's "Failed
//     Validation" and "Not Restarting" events (driverConfigError). Nothing
//     else in a task's config is checked, by the server or at start.
//   - Allocations stop at once (no kill_timeout), and nothing is garbage
//     collected: stopped allocations and evaluations stay readable.
//   - Only the "default" namespace and a single region exist; ACLs, blocking
//     queries (index/wait are answered at once), gzip and TLS are absent.
//     Error bodies carry no Content-Type when the client accepts gzip, as
//     the agent's gzipped errors look to a Go client.
//   - Exec: a task runs nothing of its own; its log starts with one line
//     saying so. A tty has no line discipline (no input echo). With tty=true
//     a stdin close within the first 20ms (before the "pty" is set up) or
//     while the command runs hangs up the terminal: exit 129. Close reasons
//     longer than 123 bytes are truncated (the agent fails to send them).
//   - `yes` stops after 1 MiB; `timeout -k` is accepted but builtins die at
//     the first signal.
package nomadsim
