// Package gatewaytest builds the whole gateway in process on the Nomad
// simulator, for tests and benchmarks only: the embedded policy bundle (or
// another), a bbolt store and a decision log in a data directory, Ed25519
// tokens, a nomad.Client on the simulator with the policy's job prefix,
// the server and an httptest server of its handler. The gateway itself is
// built by assemble.Open, the constructor `sandgate serve` uses; this
// package adds what is the tests' own (the simulator, the clock, a key in
// memory, the nodes put into the store, the listener). New takes the few
// choices the callers vary (Options) and returns the parts (Gateway),
// which speak the API in the words every suite uses (Do, Create, Exec;
// package apitest).
//
// It imports the testing package and the gateway itself: production code
// must never import it (a test of this package checks that no package of
// the module does outside its tests), and gateway's own internal tests
// cannot (the import would be a cycle).
package gatewaytest
