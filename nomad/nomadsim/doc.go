// Package nomadsim is an in-process simulator of the subset of Nomad's HTTP
// API that sandgate's gateway uses: agent, status, nodes (with drain and
// eligibility), client host stats, jobs (register, read, list, summary,
// deregister and purge, validate), evaluations, allocations (and their
// stats), variables with check-and-set, the alloc exec WebSocket, the
// alloc log stream and the alloc directory listing (fs/ls; fs.go says what
// the simulated directories hold).
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
// # Pinned by the project's own recordings
//
// testdata/recordings/real-*.json were recorded by test/e2e's recorder
// (TestRecordRealAgent with -record) from a real v1.6.5 server and client
// pair with the Docker driver, with the gateway's own job JSON, exec
// wrapper and log queries; real_recordings_test.go replays each exchange
// here. What they made the simulator do:
//
//   - Docker tasks: exec closes stdout before stderr (raw_exec: stderr
//     first); a busybox image's sh words "not found" as busybox does; a
//     stopped task's Terminated event is the container's exit 143 with the
//     driver's exit message (raw_exec: SIGINT, 130); v1.6.5 drops the
//     newer Resources (NUMA, SecretsMB) and LogConfig.Enabled fields and
//     lists AllocatedResources.TaskLifecycles; a batch job has no
//     DeploymentID.
//   - A node that goes down (SetNodeStatus "down": a client agent that was
//     killed) gets "Node heartbeat missed"; its live allocations become
//     lost/stop ("alloc is lost since its node is down") with the client's
//     last report kept (ClientDescription "Tasks are running", tasks
//     running, no new events); exec on them closes 1008 "No path to node"
//     at once, logs and stats answer 404 "No path to node", an exec in
//     flight ends with close 1000 and no exit code. A node-update
//     evaluation replaces them whatever the reschedule policy: on another
//     node that fits at once, else it fails and blocks, and the job is
//     pending. When the node is back ("ready": the agent restarted on its
//     data dir) it gets "Node reregistered by heartbeat", its client stops
//     the lost allocations' tasks (complete, Killing/Terminated/Killed), a
//     node-update evaluation run while it is still initializing supersedes
//     the blocked evaluation (the old one canceled, "existing blocked
//     evaluation exists for job"), the replacement is placed on the node
//     once it is ready, and a last node-update evaluation has nothing to do.
//     The old and the new allocation are not linked (no NextAllocation, no
//     PreviousAllocation), and the old one stays readable.
//
// # Known deviations from a real agent
//
//   - Scheduling is synchronous: the register evaluation is complete (and
//     allocations exist, pending) when the register call returns. Placement
//     spreads allocations over the least loaded feasible node. Only the
//     constraint operands listed at constraintMatches are understood; any
//     other operand fails its constraint.
//   - Updates are destructive (old allocations stop, new ones are placed);
//     there are no deployments, canaries, reschedules or migrations: a
//     failed allocation is never replaced (a lost one is, see above). A
//     drain with live allocations stays "draining" until they stop or its
//     deadline passes; then they are stopped, not migrated.
//   - A node is down only when SetNodeStatus says so, at once; a real
//     server decides it after the heartbeat TTL and grace (7-8 s after the
//     SIGKILL with the e2e agents' 2 s TTL and 4 s grace), and the node is
//     "initializing" for a moment when it comes back, which the simulator
//     never shows. While the node is down the simulator kills its
//     allocations' commands; a real host keeps the containers running until
//     the client returns and stops them. max_client_disconnect and the
//     "disconnected"/"unknown" allocation states are not modelled.
//   - Driver config is checked only where a real client refused it at task
//     start: a docker ulimit or labels that is not a list (the driver wants
//     list(map(string))) fails the task with the client's "Failed
//     Validation" and "Not Restarting" events (driverConfigError). Nothing
//     else in a task's config is checked, by the server or at start.
//   - Allocations stop at once (no kill_timeout: Killing, Terminated and
//     Killed share one timestamp), and nothing is garbage collected:
//     stopped allocations and evaluations stay readable.
//   - Only the "default" namespace and a single region exist; ACLs, blocking
//     queries (index/wait are answered at once), gzip and TLS are absent.
//     Error bodies carry no Content-Type when the client accepts gzip, as
//     the agent's gzipped errors look to a Go client.
//   - Timing: an allocation runs RunDelay after register (a real docker
//     task about 1 s), an exec answers at once (a real one
//     takes about 100 ms at the policy's default 500 MHz, and 400-700 ms in
//     100 ms steps for a 100 MHz sandbox, whose CFS quota throttles the
//     wrapper's processes), and a timed-out exec ends at the
//     wrapper's timeout: the real wrapper also waits up to its kill-after
//     for a process group that ignores SIGTERM before SIGKILL, which the
//     builtins never do (they die at the first signal).
//   - Exec: a task runs nothing of its own. Unless Config.QuietTasks is set,
//     its stdout log starts with one line saying so, where a real sandbox
//     task's logs are empty. A tty has no line discipline (no input echo).
//     With tty=true a stdin close within the first 20ms (before the "pty"
//     is set up) or while the command runs hangs up the terminal: exit 129.
//     Close reasons longer than 123 bytes are truncated (the agent fails to
//     send them). Background commands of the simulated sh ('&') are killed
//     when their script ends; real ones outlive it.
//   - `yes` stops after 1 MiB; `timeout -k` is accepted but builtins die at
//     the first signal.
package nomadsim
