// Package attack is sandgate's attack suite: a table of named hostile
// requests against the whole gateway in-process (the Nomad simulator, a
// real bbolt store, real Ed25519 JWTs, the embedded policy bundle (with rate
// limits no case reaches, see attackEngine) and a real
// decision log). Each case asserts the status, the problem code, the rule
// ids where the policy decided, and that nothing changed: the sandbox and
// token records, the node records and budgets, and the simulator's jobs and
// nodes are compared before and after, and a refused request reaches Nomad
// not at all.
//
// The role × route matrix walks the gateway's own route table
// ((*gateway.Server).Echo().Routes()) against the policy data's route map,
// so a route added later is attacked by construction. holes_test.go holds
// the cases for behaviour that is being fixed.
package attack
