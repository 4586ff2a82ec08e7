package isolation

import (
	"os"
	"testing"
	"time"
)

// fakeNomadEnv makes the test binary stand in for a `nomad agent` process:
// started through a symlink named nomad, its command line is what the
// script's control-plane checks read.
const fakeNomadEnv = "SANDGATE_TEST_FAKE_NOMAD"

func TestMain(m *testing.M) {
	if os.Getenv(fakeNomadEnv) == "1" {
		time.Sleep(30 * time.Second) // bounded: the test kills it much sooner
		os.Exit(0)
	}
	os.Exit(m.Run())
}
