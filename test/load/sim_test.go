package load

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sandgate/nomad/nomadsim"
)

// The soak's Nomad simulator runs in a child process (this test binary,
// run again with simChildEnv set), so the resident set the soak bounds is
// the gateway's and its clients', not the test double's: like a Nomad
// server before its garbage collection, the simulator keeps every
// allocation it ever placed.

const (
	simChildEnv = "SANDGATE_LOAD_SIM_CHILD"
	simNodesEnv = "SANDGATE_LOAD_SIM_NODES"
)

func TestMain(m *testing.M) {
	if os.Getenv(simChildEnv) == "1" {
		if err := runSimChild(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "simulator child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// simConfig is the simulated cluster of a test: its workers and a
// control-plane node beside them.
func simConfig(workers []string, runDelay time.Duration) nomadsim.Config {
	cfg := nomadsim.Config{RunDelay: runDelay}
	if runDelay == 0 {
		cfg.RunDelay = 20 * time.Millisecond
	}
	for _, n := range workers {
		cfg.Nodes = append(cfg.Nodes, nomadsim.NodeConfig{Name: n})
	}
	cfg.Nodes = append(cfg.Nodes, nomadsim.NodeConfig{Name: "control-1", ControlPlane: true,
		Meta: map[string]string{nomadsim.ControlPlaneMetaKey: "true"}})
	return cfg
}

// runSimChild serves a simulator on a loopback port, writes its address
// as the first line of out and serves until in reaches EOF (the parent
// closed it, or died).
func runSimChild(in io.Reader, out io.Writer) error {
	sim, err := nomadsim.New(simConfig(strings.Split(os.Getenv(simNodesEnv), ","), 0))
	if err != nil {
		return err
	}
	defer sim.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sim.Start(ln)
	if _, err := fmt.Fprintln(out, "http://"+ln.Addr().String()); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, in)
	return err
}

// startSimProcess starts the simulator child for workers and returns its
// URL and a function that stops it and waits for it.
func startSimProcess(t testing.TB, workers []string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // G204: this test binary, run again as the simulator
	cmd.Env = append(os.Environ(), simChildEnv+"=1", simNodesEnv+"="+strings.Join(workers, ","))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		t.Fatalf("the simulator child did not say its address: %v", err)
	}
	return strings.TrimSpace(line), stop
}
