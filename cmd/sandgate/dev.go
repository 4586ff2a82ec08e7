package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/store"
)

// simulatedClusterBanner is printed on every start on the simulator.
const simulatedClusterBanner = `
################################################################################
#  SIMULATED NOMAD CLUSTER: NOMAD_ADDR is not set, so sandgate runs on its      #
#  built-in Nomad simulator (2 linux/arm64 workers, 1 control-plane node).      #
#  NO CONTAINER IS STARTED AND NO COMMAND IS EXECUTED: exec answers from a      #
#  fixed set of builtins (echo, cat, env, pwd, sleep, true, false, ...).        #
#  Set NOMAD_ADDR (and NOMAD_TOKEN) to drive a real cluster.                    #
################################################################################
`

func newDevCmd() *cobra.Command {
	var (
		listen, dataDir, tokenFile, policyDir string
		nomadAgent, image                     string
		enroll                                []string
		tokenTTL                              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the gateway for development: embedded bundle and store, a real Nomad at NOMAD_ADDR or the simulator",
		Long: `Start the gateway with the embedded policy bundle and a bbolt store in the
data dir, mint an operator token, write it to --token-file (mode 0600) and
print it.

With NOMAD_ADDR set (and NOMAD_TOKEN when the cluster has ACLs) it drives that
Nomad; --enroll NODE enrolls worker nodes for sandboxes.

With --nomad-agent PATH (make run-nomad) it starts a real local Nomad from
that binary: a server-only agent and a client-only agent (worker-1) with the
docker driver, below <data>/nomad. It overlays the bundle's data for the
node's architecture and --image (a local image: no registry is reached) and
prints the overlay, enrolls worker-1, and on exit purges every job, stops
both agents and removes <data>/nomad. It needs root and a Docker engine.

Without NOMAD_ADDR or --nomad-agent it starts the built-in Nomad simulator
with two enrolled linux/arm64 workers (worker-1 for sandboxes, worker-2 for
sandboxes with egress) and one control-plane node, and says so loudly:
nothing is executed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			if tokenFile == "" {
				tokenFile = filepath.Join(dataDir, "operator.token")
			}
			o := gatewayOptions{Listen: listen, DataDir: dataDir, Policy: policies.Config{Dir: policyDir}, WatchPolicy: policyDir != "", Nomad: nomad.DefaultConfig(),
				// dev keeps the masked inputs, so `sandgate policy replay` has something to replay.
				DecisionInputs: true,
				ListenHint:     "is another gateway running? Choose another address with --listen, e.g. --listen 127.0.0.1:8081 (with make: make run RUN_ARGS='--listen 127.0.0.1:8081')"}
			ncfg, fromEnv := nomadFromEnv()
			switch {
			case image != "" && nomadAgent == "":
				return errors.New("--image goes with --nomad-agent (the local image of the Nomad it starts)")
			case nomadAgent != "" && fromEnv:
				return fmt.Errorf("--nomad-agent starts a Nomad of its own: unset NOMAD_ADDR (it is %s), or drop --nomad-agent to drive that one", ncfg.Address)
			case nomadAgent != "":
				local, err := startLocalNomad(ctx, nomadAgent, image, dataDir, policyDir, out)
				if err != nil {
					return err
				}
				defer local.close(out)
				o.Nomad.Address = local.cluster.Server.HTTPAddr
				o.Policy, o.WatchPolicy = policies.Config{Dir: local.policyDir}, false
				o.Nodes = []store.Node{local.node}
			case fromEnv:
				o.Nomad = ncfg
				for _, spec := range enroll {
					n, err := parseEnroll(spec)
					if err != nil {
						return err
					}
					o.Nodes = append(o.Nodes, n)
				}
			default:
				fmt.Fprint(out, simulatedClusterBanner)
				addr, closeSim, err := startSimulator()
				if err != nil {
					return err
				}
				defer closeSim()
				o.Nomad.Address = "http://" + addr
				o.Simulated = true
				o.Nodes = []store.Node{
					{Name: "worker-1", Enrollment: "sandbox", State: "active"},
					{Name: "worker-2", Enrollment: "sandbox+egress", State: "active"},
				}
			}
			o.Ready = func(addr string, iss *token.Issuer, st store.Store, s policies.Settings) error {
				raw, rec, err := gateway.MintToken(ctx, iss, st, s, gateway.TokenRequest{Role: token.RoleOperator, Subject: "dev-operator", Label: "sandgate dev", TTL: tokenTTL})
				if err != nil {
					return fmt.Errorf("mint the operator token: %w", err)
				}
				if err := os.WriteFile(tokenFile, []byte(raw+"\n"), 0o600); err != nil {
					return fmt.Errorf("write %s: %w", tokenFile, err)
				}
				if o.Simulated {
					fmt.Fprint(out, simulatedClusterBanner)
				}
				fmt.Fprintf(out, "\nsandgate dev: http://%s  (Nomad: %s)\n", addr, o.Nomad.Address)
				fmt.Fprintf(out, "operator token (expires %s), also in %s:\n\n%s\n\n",
					rec.ExpiresAt.UTC().Format(time.RFC3339), tokenFile, raw)
				fmt.Fprintf(out, "try:  export SANDGATE_TOKEN=$(cat %s)\n      curl -s -H \"Authorization: Bearer $SANDGATE_TOKEN\" -X POST http://%s/v1/sandboxes -d '{}'\n\n", tokenFile, addr)
				return nil
			}
			return runGateway(ctx, o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&dataDir, "data", "./.sandgate", "data dir: store, signing key, decision log, operator token")
	f.StringVar(&tokenFile, "token-file", "", "where to write the operator token (default <data>/operator.token)")
	f.StringArrayVar(&enroll, "enroll", nil, "with NOMAD_ADDR: enroll a node, NAME or NAME:egress (repeatable)")
	f.DurationVar(&tokenTTL, "token-ttl", 12*time.Hour, "lifetime of the operator token")
	f.StringVar(&nomadAgent, "nomad-agent", "", "start a real local Nomad from this binary (a server-only and a client-only agent; needs root and Docker)")
	f.StringVar(&image, "image", "", "with --nomad-agent: the local sandbox image the bundle allows and defaults to")
	addPolicyDirFlag(cmd, &policyDir)
	return cmd
}

// parseEnroll reads NAME or NAME:egress.
func parseEnroll(spec string) (store.Node, error) {
	name, mode, _ := strings.Cut(spec, ":")
	n := store.Node{Name: name, Enrollment: "sandbox", State: "active"}
	switch {
	case name == "":
		return n, fmt.Errorf("--enroll %q: a node name is required", spec)
	case mode == "egress":
		n.Enrollment = "sandbox+egress"
	case mode != "":
		return n, fmt.Errorf("--enroll %q: want NAME or NAME:egress", spec)
	}
	return n, nil
}

// startSimulator serves the Nomad simulator on a loopback port.
func startSimulator() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	sim, err := nomadsim.New(nomadsim.DefaultConfig())
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	sim.SetAddress(ln.Addr().String())
	hs := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		sim.Close()
	}, nil
}

// nomadFromEnv is the Nomad client configuration of the NOMAD_* variables
// (the same ones the nomad CLI reads); ok is false without NOMAD_ADDR.
func nomadFromEnv() (nomad.Config, bool) {
	cfg := nomad.DefaultConfig()
	addr := os.Getenv("NOMAD_ADDR")
	if addr == "" {
		return cfg, false
	}
	cfg.Address = addr
	cfg.Token = os.Getenv("NOMAD_TOKEN")
	cfg.Region = os.Getenv("NOMAD_REGION")
	cfg.Namespace = os.Getenv("NOMAD_NAMESPACE")
	cfg.TLS = nomad.TLSConfig{
		CACert: os.Getenv("NOMAD_CACERT"), ClientCert: os.Getenv("NOMAD_CLIENT_CERT"),
		ClientKey: os.Getenv("NOMAD_CLIENT_KEY"), ServerName: os.Getenv("NOMAD_TLS_SERVER_NAME"),
	}
	return cfg, true
}
