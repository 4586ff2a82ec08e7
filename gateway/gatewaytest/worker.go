package gatewaytest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"sandgate/gateway/replay"
)

// servesWorkers is set by Main: this test binary can be a replay worker.
var servesWorkers atomic.Bool

// Main is the TestMain of a package whose gateways replay candidate
// bundles: a gateway runs a candidate in a worker process, the sandgate
// binary re-executed with replay.WorkerArgs; in a test that binary is the
// test binary itself, which Main turns into the worker when it is started
// with those arguments (replay.ServeWorker, the entry point of the real
// binary's hidden subcommand). Otherwise it runs the tests, and New gives
// every gateway that worker (replay.SelfCommand). In a package without
// Main the gateways have no worker, and replay answers 503.
func Main(m *testing.M) {
	if replay.IsWorker(os.Args[1:]) {
		if err := replay.ServeWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	servesWorkers.Store(true)
	os.Exit(m.Run())
}
