package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"sandgate/nomad/nomadsim"
)

// simServerBanner is printed by `sandgate sim` before its address.
const simServerBanner = `
################################################################################
#  SIMULATED NOMAD CLUSTER: this is sandgate's built-in Nomad simulator, not   #
#  a Nomad. It speaks Nomad's HTTP API, so gateways use it as they would use   #
#  a real cluster, but NO CONTAINER IS STARTED AND NO COMMAND IS EXECUTED:     #
#  exec answers from a fixed set of builtins (echo, cat, env, sleep, ...).     #
#  It has no ACLs and no TLS, and it keeps everything in memory: its jobs are  #
#  gone when it stops.                                                         #
################################################################################
`

func newSimCmd() *cobra.Command {
	var listen, advertise string
	cmd := &cobra.Command{
		Use:   "sim [--listen ADDR] [--advertise HOST:PORT]",
		Short: "Serve the built-in Nomad simulator's HTTP API, for several gateways to share one simulated cluster",
		Long: `Serve the Nomad simulator that 'sandgate dev' runs in-process on its own
address until SIGINT or SIGTERM, so that several gateways ('sandgate serve'
replicas, 'sandgate dev' with NOMAD_ADDR) share one simulated cluster as they
would share a real Nomad. It prints a SIMULATED banner and the NOMAD_ADDR to
use ("nomad.address" in serve's configuration file).

The cluster is the one 'sandgate dev' simulates: two ready linux/arm64
workers, worker-1 and worker-2 (whose meta declares the isolation bundle,
so it can be enrolled for egress), and one control-plane node, control-1.
Nothing is executed and nothing is kept when it stops.

--listen 127.0.0.1:0 picks a free port; the address line says which.
The simulated nodes advertise --advertise as their HTTP address (Nomad's
exec and log calls dial it first): by default the bound address, which a
listen address without a host (:4646, 0.0.0.0:4646) cannot be, so it then
needs --advertise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen %s: %w; is a Nomad (or another sandgate sim) listening there? Choose another address with --listen, e.g. --listen 127.0.0.1:4647", listen, err)
			}
			addr, err := simAdvertise(ln.Addr(), advertise)
			if err != nil {
				_ = ln.Close()
				return err
			}
			cfg := nomadsim.DefaultConfig()
			sim, err := nomadsim.New(cfg)
			if err != nil {
				_ = ln.Close()
				return err
			}
			sim.Start(ln)
			sim.SetAddress(addr)
			defer sim.Close()
			out := cmd.OutOrStdout()
			fmt.Fprint(out, simServerBanner)
			printSimCluster(out, cfg, ln.Addr().String(), addr)
			<-ctx.Done()
			fmt.Fprintln(out, "sandgate sim: stopping; the simulated cluster's jobs are gone")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:4646", "address to serve the simulated Nomad API on (port 0: a free one)")
	f.StringVar(&advertise, "advertise", "", "HOST:PORT the simulated nodes advertise and gateways dial (default: the bound address)")
	return cmd
}

// simAdvertise is the address the simulated nodes advertise: advertise
// when given, else the bound address, which must then name a host.
func simAdvertise(bound net.Addr, advertise string) (string, error) {
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			return "", fmt.Errorf("--advertise %q: want HOST:PORT: %w", advertise, err)
		}
		return advertise, nil
	}
	tcp, ok := bound.(*net.TCPAddr)
	if ok && tcp.IP.IsUnspecified() {
		return "", errors.New("--listen names no host (it binds every address): give the address gateways reach this host at with --advertise HOST:PORT")
	}
	return bound.String(), nil
}

// printSimCluster says where the simulator listens, which nodes it
// simulates, and how a gateway is pointed at it.
func printSimCluster(w io.Writer, cfg nomadsim.Config, bound, addr string) {
	var devEnroll, enroll []string
	fmt.Fprintf(w, "\nsandgate sim: SIMULATED Nomad API listening on %s, advertised as http://%s\n", bound, addr)
	fmt.Fprintln(w, "simulated nodes:")
	for _, n := range cfg.Nodes {
		var notes []string
		switch {
		case n.ControlPlane:
			notes = append(notes, "control plane: never enrolled (P2)")
		case n.Meta[nomadsim.IsolationMetaKey] != "":
			notes = append(notes, "declares the isolation bundle: may be enrolled for egress")
			devEnroll = append(devEnroll, n.Name+":egress")
			enroll = append(enroll, fmt.Sprintf(`{"name": %q, "egress": true}`, n.Name))
		default:
			devEnroll = append(devEnroll, n.Name)
			enroll = append(enroll, fmt.Sprintf(`{"name": %q}`, n.Name))
		}
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-10s %s/%s  %s", n.Name, orDefault(n.OS, nomadsim.DefaultOS), orDefault(n.Arch, nomadsim.DefaultArch), strings.Join(notes, "; ")), " "))
	}
	fmt.Fprintf(w, "\nPoint every gateway at it:\n\n  export NOMAD_ADDR=http://%s\n\n", addr)
	fmt.Fprintf(w, "  sandgate dev:   NOMAD_ADDR=http://%s sandgate dev --enroll %s\n", addr, strings.Join(devEnroll, " --enroll "))
	fmt.Fprintf(w, "  sandgate serve: \"nomad\": {\"address\": \"http://%s\"}, \"nodes\": [%s]\n\n", addr, strings.Join(enroll, ", "))
	fmt.Fprintln(w, "Gateways with separate stores each reconcile the cluster (L4) and purge the sandbox jobs they have no record of: see docs/runbook.md.")
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
