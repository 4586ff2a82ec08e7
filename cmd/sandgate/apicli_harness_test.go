package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// liveGateway is a real gateway (embedded bundle, bbolt store, decision
// log) on the Nomad simulator, served on a loopback port, wired as `sandgate
// dev` wires it, with an operator token minted at start.
type liveGateway struct {
	addr     string // http://127.0.0.1:port
	operator string
}

func startLiveGateway(t *testing.T) *liveGateway {
	t.Helper()
	simAddr, closeSim, err := startSimulator()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSim)
	o := gatewayOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Nomad: nomad.DefaultConfig(), Simulated: true,
		Nodes: []store.Node{
			{Name: "worker-1", Enrollment: "sandbox", State: "active"},
			{Name: "worker-2", Enrollment: "sandbox+egress", State: "active"},
		}}
	o.Nomad.Address = "http://" + simAddr
	ctx, cancel := context.WithCancel(context.Background())
	type started struct{ addr, tok string }
	ready := make(chan started, 1)
	o.Ready = func(addr string, iss *token.Issuer, st store.Store, s policies.Settings) error {
		raw, _, err := gateway.MintToken(ctx, iss, st, s, gateway.TokenRequest{Role: token.RoleOperator, Subject: "cli-test-operator", Label: "cli test", TTL: time.Hour})
		if err == nil {
			ready <- started{"http://" + addr, raw}
		}
		return err
	}
	done := make(chan error, 1)
	go func() { done <- runGateway(ctx, o, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case s := <-ready:
		return &liveGateway{addr: s.addr, operator: s.tok}
	case err := <-done:
		t.Fatalf("the gateway ended before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not become ready in 60 s")
	}
	return nil
}

// cli runs the CLI against the gateway with the given token.
func (g *liveGateway) cli(t *testing.T, tok string, args ...string) (int, string, string) {
	t.Helper()
	return g.cliIn(t, "", tok, args...)
}

func (g *liveGateway) cliIn(t *testing.T, stdin, tok string, args ...string) (int, string, string) {
	t.Helper()
	// before the subcommand: exec's argv after -- must stay the command's
	return runCLI(t, stdin, append([]string{"--addr", g.addr, "--token", tok}, args...)...)
}

// mustOK fails the test unless the CLI exited 0.
func mustOK(t *testing.T, code int, stdout, stderr string) string {
	t.Helper()
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	return stdout
}

// decodeJSON parses what -o json printed; anything but one JSON document
// on stdout fails the test.
func decodeJSON[T any](t *testing.T, stdout string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", stdout)
	}
	return v
}

// closedAddr is a loopback URL where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
