// Package crash kills `sandgate serve` with SIGKILL at every named step of
// a create and of a destroy, restarts it on the same data dir, and checks
// that nothing was left behind.
//
// The binary is built with the tag sandgate_testhooks (gateway/testhook):
// armed through SANDGATE_TESTHOOK_PAUSE or a pause file, it stops at a
// named point and says so on standard error. The Nomad simulator runs in
// the test process on a loopback port and plays the cluster that outlives
// the gateway's crashes. Each cycle arms one point (cycling through
// testhook.Points, so a new point is covered without a change here),
// drives a create (and, for a point the create does not reach, a destroy
// of the sandbox it made), waits for the pause line, kills the process,
// checks the store as the crash left it, restarts the gateway and waits for
// its reconciliation to settle: no orphan prefixed job, no ghost record, no
// record left starting, and the budget use per node and per principal
// equal to the live records.
//
// The hundred cycles run in four lanes at once, each a gateway with its
// own simulator and data dir (twenty cycles with -short). Their cost is
// the restarts: each start compiles the policy bundle. The same loop runs
// on PostgreSQL too (every point twice, two lanes, each on a database of
// its own from the server `make test` starts; it skips without one).
//
// TestTheProductionBinaryHasNoTestHooks checks the other side: the binary
// built without the tag carries no pause code.
package crash
