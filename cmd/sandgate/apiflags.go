package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"sandgate/gateway/client"
)

// Environment variables of the API commands.
const (
	envAddr  = "SANDGATE_ADDR"
	envToken = "SANDGATE_TOKEN" //nolint:gosec // G101: the variable's name, not a credential
)

// defaultAddr is the local `sandgate dev` gateway.
const defaultAddr = "http://127.0.0.1:8080"

// Output formats of the API commands.
const (
	outputTable = "table" // the columns that fit 100 columns of a terminal
	outputWide  = "wide"  // every column, at full width
	outputJSON  = "json"
)

// apiFlags are the persistent flags of the command groups that talk to
// the REST API (sandbox, host, token).
type apiFlags struct {
	addr, token, tokenFile, output string
}

// addAPIFlags registers --addr, --token, --token-file and -o on cmd and
// its subcommands. The address default comes from SANDGATE_ADDR; the
// token's is read at run time (SANDGATE_TOKEN), so that help never
// prints it.
func addAPIFlags(cmd *cobra.Command) *apiFlags {
	a := &apiFlags{}
	addr := os.Getenv(envAddr)
	if addr == "" {
		addr = defaultAddr
	}
	f := cmd.PersistentFlags()
	f.StringVar(&a.addr, "addr", addr, "gateway URL (env "+envAddr+")")
	f.StringVar(&a.token, "token", "", "bearer token (default: env "+envToken+"; a flag is visible to other local users, prefer the env or --token-file)")
	f.StringVar(&a.tokenFile, "token-file", "", "read the bearer token from this file")
	f.StringVarP(&a.output, "output", "o", outputTable, "output format: table (fits 100 columns), wide (every column) or json")
	return a
}

// resolveToken picks --token, else --token-file, else SANDGATE_TOKEN.
func (a *apiFlags) resolveToken() (string, error) {
	switch {
	case a.token != "" && a.tokenFile != "":
		return "", errors.New("--token and --token-file exclude each other")
	case a.token != "":
		return a.token, nil
	case a.tokenFile != "":
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("--token-file %s is empty", a.tokenFile)
		}
		return tok, nil
	}
	return os.Getenv(envToken), nil
}

// client checks the output format and builds the API client.
func (a *apiFlags) client() (*client.Client, error) {
	if a.output != outputTable && a.output != outputWide && a.output != outputJSON {
		return nil, fmt.Errorf("-o/--output must be table, wide or json, not %q", a.output)
	}
	tok, err := a.resolveToken()
	if err != nil {
		return nil, err
	}
	if tok == "" {
		return nil, fmt.Errorf("no token: pass --token-file FILE or set %s (sandgate dev writes one to <data>/operator.token)", envToken)
	}
	c, err := client.New(client.Config{Addr: a.addr, Token: tok, UserAgent: "sandgate-cli/" + version})
	if err != nil {
		return nil, fmt.Errorf("--addr/--token: %w", err)
	}
	return c, nil
}

// json reports whether -o json was asked for.
func (a *apiFlags) json() bool { return a.output == outputJSON }

// wide reports whether -o wide was asked for.
func (a *apiFlags) wide() bool { return a.output == outputWide }

// interruptible is the command's context, cancelled by Ctrl-C or SIGTERM.
func interruptible(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

// apiError turns a client error into what the CLI prints and exits with:
// a problem names its status, code, detail, rules and decision (exit 3
// when a policy decided, else 1); a transport failure names the address.
func apiError(a *apiFlags, err error) error {
	var p *client.Problem
	if errors.As(err, &p) {
		pe := &problemError{p: p}
		if p.Denied() {
			return &exitCodeError{code: exitDenied, err: pe}
		}
		return pe
	}
	var te *client.TransportError
	if errors.As(err, &te) {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted: %s %s got no answer", te.Method, te.URL)
		}
		return fmt.Errorf("no answer from the gateway at %s (check --addr or %s): %s %s: %w", a.addr, envAddr, te.Method, te.URL, te.Err)
	}
	return err
}

// problemError prints a problem for a person:
//
//	403 policy_denied: T2: session token is bound to another sandbox
//	rules: T2
//	decision: 5f0c...
type problemError struct {
	p *client.Problem
	// hint is what the command adds for this problem (withHint).
	hint string
}

// withHint adds hint to the problem err carries when its code is code: a
// command names its own flag where the API's detail names the REST form.
func withHint(err error, code, hint string) error {
	var pe *problemError
	if errors.As(err, &pe) && pe.p.Code == code {
		pe.hint = hint
	}
	return err
}

func (e *problemError) Unwrap() error { return e.p }

func (e *problemError) Error() string {
	p := e.p
	var b strings.Builder
	b.WriteString(p.Error())
	if p.Field != "" {
		fmt.Fprintf(&b, "\nfield: %s", p.Field)
	}
	if len(p.RuleIDs) > 0 {
		fmt.Fprintf(&b, "\nrules: %s", strings.Join(p.RuleIDs, ", "))
	}
	for _, v := range p.Violations { // the messages the detail does not carry already
		if !strings.Contains(p.Detail, v.Msg) {
			fmt.Fprintf(&b, "\n  %s: %s", v.Rule, v.Msg)
		}
	}
	if p.DecisionID != "" {
		fmt.Fprintf(&b, "\ndecision: %s", p.DecisionID)
	}
	if p.RetryAfter > 0 {
		fmt.Fprintf(&b, "\nretry after: %s", p.RetryAfter)
	}
	if p.Status == 401 {
		fmt.Fprintf(&b, "\nhint: check --token, --token-file or %s", envToken)
	}
	if e.hint != "" {
		fmt.Fprintf(&b, "\nhint: %s", e.hint)
	}
	return b.String()
}

// nonZero is &v, or nil when v is its type's zero: a flag left at its zero
// is left out of the request body (the body's members are pointers, nil
// for absent), so the policy's default applies, as before the bodies
// moved to gateway/wire, when zero members were omitted.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
