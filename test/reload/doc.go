// Package reload tests the policy bundle's life in a running `sandgate
// serve`, as an operator drives it: a signed bundle file built by
// `sandgate policy build`, verified at start and at every reload; a
// rebuilt file reloaded on its own (fsnotify) and on SIGHUP; a tampered,
// unsigned or failing bundle refused while the old revision keeps serving,
// with GET /v1/policy, the log and the metrics naming the revision in
// force.
package reload
