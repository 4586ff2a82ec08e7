// Package load holds the gateway's load and leak tests: the whole gateway
// in-process on the Nomad simulator, driven over HTTP through
// gateway/client as agents drive it.
//
//   - TestRacingCreatesNeverOverrun (part of make test): 10,000 creates
//     from racing workers against small node budgets and agent quotas,
//     with destroys freeing room as they go; no budget or quota is ever
//     overrun and every refusal is a 429 naming B1 or B3.
//   - TestSoak (make soak; skipped unless SANDGATE_SOAK=1): mixed traffic
//     of 50 agents for SANDGATE_SOAK_DURATION (default 5m), then no
//     goroutine outlives the gateway (goleak), the resident set stays
//     within the bound the test states (the simulator runs in a child
//     process, so it is the gateway's), and no answer was anything but
//     2xx or the 4xx that request was meant to get.
//
// Under the race detector the racing test makes 1,000 creates (10,000
// would take minutes of make test); make soak runs the 10,000 without it.
package load
