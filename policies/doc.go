// Package policies holds sandgate's Rego policy bundle and the embedded OPA
// engine that evaluates it.
//
// The bundle (the .manifest, data.json and the authz and admission packages
// in this directory) is embedded into the binary; an operator may load a
// bundle directory from disk instead. New compiles and prepares each
// entrypoint once; Decide evaluates one entrypoint on one input. A Decision
// is a value: Allow is true only when the policy returned no violation. Any
// error from Decide means the decision could not be made and callers must
// treat it as a deny (fail closed).
//
// The package imports only OPA and the standard library: callers put store,
// Nomad and token facts into the input; the policy never reaches out.
package policies
