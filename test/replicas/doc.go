// Package replicas runs several `sandgate serve` processes on one
// PostgreSQL database and one simulated Nomad cluster, as a deployment
// behind a load balancer runs them, and checks what must hold across
// replicas: racing creates never overrun a node's budget or an agent's
// quota, one Idempotency-Key sent to every replica at once makes one
// sandbox, killing the replica that holds the background lease hands the
// reaper to another, and restarting the database under load loses and
// duplicates nothing. The tests take their databases from the server
// `make test` starts (internal/pgtest) and skip without one, saying so.
package replicas
