// Package e2e is the end-to-end suite on a real Nomad agent: the oracle of
// the project's tests.
//
// TestMain starts a server-only and a client-only Nomad agent (NOMAD_BIN,
// default ../shared/nomad/nomad from the repository root) on 127.0.0.1 with
// the docker plugin (allow_privileged = false, volumes disabled, image GC
// off: the images cannot be pulled again), builds the two local sandbox
// images once (busybox FROM scratch, Debian 12 by debootstrap; reused by
// tag), builds the sandgate binary and writes a policy directory that
// differs from the embedded bundle only in data
// (test/testdata/e2e-policy-data-patch.json). Each test runs its own
// `sandgate serve` process with its own data dir and its own Nomad
// namespace, so one gateway's reconciliation never sees another's jobs.
// Tests that stop or drain a node start a client agent of their own.
//
// Without a Nomad binary, a reachable Docker engine or root, every test
// skips with one line saying which; SANDGATE_E2E=require (set by .ci/run)
// turns that skip into a failure. The suite cleans up after itself, also
// when a test fails: the test's jobs purged, the agents stopped by PID (they
// also die with the test binary), alloc mounts unmounted, containers gone.
package e2e
