package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway"
	"sandgate/gateway/client"
	"sandgate/gateway/token"
	"sandgate/store"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint, list and revoke operator and agent tokens",
		Long: `Mint, list and revoke operator and agent tokens through a running gateway
(--addr or ` + envAddr + `) with an operator token (T4).

The first operator token is minted offline, with the data dir's signing key,
while the gateway is stopped: sandgate token mint --offline --data DIR ...`,
	}
	a := addAPIFlags(cmd)
	cmd.AddCommand(newTokenMintCmd(a), newTokenListCmd(a), newTokenRevokeCmd(a))
	return cmd
}

// offlineOnly are the flags of an offline mint: they address the data dir.
var offlineOnly = []string{"data", "key-file", "key-dir", "issuer", "audience", "policy-dir", "store"}

type mintFlags struct {
	role, subject, label                                  string
	dataDir, keyFile, keyDir, issuer, audience, policyDir string
	store                                                 string
	ttl                                                   time.Duration
	maxLive                                               int64
	offline                                               bool
}

func newTokenMintCmd(a *apiFlags) *cobra.Command {
	m := &mintFlags{}
	cmd := &cobra.Command{
		Use:   "mint --role operator|agent|reviewer [--ttl DUR] [--subject S] [--label L] [--max-live-sandboxes N] [--offline --data DIR]",
		Short: "Mint an operator, agent or reviewer token (through the gateway, or --offline with its signing key)",
		Long: `Mint an operator, agent or reviewer token and print the secret on stdout, once.
A reviewer token reads the policy in force and the decision log, dry-runs and
replays, and is refused everything else.

By default the running gateway mints it (POST /v1/tokens, an operator
token is needed). With --offline the token is minted with the signing key
of the data dir and recorded in its store (a token the store does not know
is refused): the store is a single file locked by a running gateway, so
stop the gateway first. This is how the first operator token is made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch token.Role(m.role) {
			case token.RoleOperator, token.RoleAgent, token.RoleReviewer:
			default:
				return fmt.Errorf("--role must be operator, agent or reviewer, not %q", m.role)
			}
			if m.ttl <= 0 {
				return errors.New("--ttl must be positive, e.g. 24h")
			}
			if m.offline {
				if cmd.Flags().Changed("max-live-sandboxes") {
					return errors.New("--max-live-sandboxes is set by the gateway's tokens API: mint without --offline")
				}
				return mintOffline(cmd, m)
			}
			for _, name := range offlineOnly {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s works only with --offline: without it the running gateway at %s mints the token and %s does not apply (add --offline to mint with the data dir's key while the gateway is stopped)",
						name, a.addr, "--"+name)
				}
			}
			return mintOnline(cmd, a, m)
		},
	}
	f := cmd.Flags()
	f.StringVar(&m.role, "role", "", "operator, agent or reviewer")
	f.DurationVar(&m.ttl, "ttl", 24*time.Hour, "lifetime, e.g. 24h")
	f.StringVar(&m.subject, "subject", "", "the token's subject (sub); agents' sandboxes are owned by it")
	f.StringVar(&m.label, "label", "", "a label shown when tokens are listed")
	f.Int64Var(&m.maxLive, "max-live-sandboxes", 0, "agents: live sandboxes this principal may hold (default from the policy, B3)")
	f.BoolVar(&m.offline, "offline", false, "mint with the data dir's signing key while the gateway is stopped")
	f.StringVar(&m.dataDir, "data", "./.sandgate", "with --offline: the gateway's data dir")
	f.StringVar(&m.keyFile, "key-file", "", "with --offline: signing key (default <data>/signing.key)")
	f.StringVar(&m.keyDir, "key-dir", "", "with --offline: key directory; its active key signs (the gateway's signing_key_dir)")
	f.StringVar(&m.issuer, "issuer", "", "with --offline: iss claim (default sandgate)")
	f.StringVar(&m.audience, "audience", "", "with --offline: aud claim (default sandgate-api)")
	f.StringVar(&m.store, "store", "", "with --offline: the store to record it in, bolt:DIR or postgres:DSN (default: the data dir's bbolt file)")
	addPolicyDirFlag(cmd, &m.policyDir)
	return cmd
}

// mintOnline asks the gateway: POST /v1/tokens.
func mintOnline(cmd *cobra.Command, a *apiFlags, m *mintFlags) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	req := client.MintRequest{Role: new(m.role), TTLSeconds: new(seconds(m.ttl)), Label: nonZero(m.label), Subject: nonZero(m.subject)}
	if cmd.Flags().Changed("max-live-sandboxes") {
		req.Quota = &client.MintQuota{MaxLiveSandboxes: new(m.maxLive)}
	}
	tk, err := c.MintToken(cmd.Context(), req)
	if err != nil {
		return apiError(a, err)
	}
	if a.json() {
		return printJSON(cmd.OutOrStdout(), tk)
	}
	fmt.Fprintln(cmd.OutOrStdout(), tk.Token)
	fmt.Fprintf(cmd.ErrOrStderr(), "minted %s token %s for %q, expires %s; the secret above is shown only this once\n",
		tk.Role, tk.ID, tk.Subject, tk.ExpiresAt)
	return nil
}

// mintOffline mints with the data dir's key and records the token in its
// store (the behaviour of `token mint` before the tokens API existed). The
// bundle (embedded, or --policy-dir) decides first, as it does for POST
// /v1/tokens (T4: role, lifetime, label, subject; gateway.DecideOfflineMint
// builds the route's input): a deny prints the rules and exits 3, and
// nothing is written.
func mintOffline(cmd *cobra.Command, m *mintFlags) error {
	engine, err := loadEngine(cmd, m.policyDir)
	if err != nil {
		return err
	}
	req := gateway.TokenRequest{Role: token.Role(m.role), Subject: m.subject, Label: m.label, TTL: time.Duration(seconds(m.ttl)) * time.Second}
	d, err := gateway.DecideOfflineMint(cmd.Context(), engine, time.Now(), req)
	if err != nil {
		var p *gateway.Problem
		if errors.As(err, &p) {
			return fmt.Errorf("%s: %s (nothing was minted)", p.Code, p.Detail)
		}
		return err
	}
	if !d.Allow {
		w := cmd.ErrOrStderr()
		fmt.Fprintf(w, "sandgate: the policy denied this mint, as POST /v1/tokens would (decision %s, revision %s); nothing was minted:\n", d.ID, d.Revision)
		for _, v := range d.Violations {
			fmt.Fprintf(w, "  %s: %s\n", v.Rule, v.Msg)
		}
		fmt.Fprintf(w, "rules: %s\n", strings.Join(d.RuleIDs(), ", "))
		return errDenied
	}
	if m.keyFile != "" && m.keyDir != "" {
		return errors.New("--key-file and --key-dir: give one (the gateway's signing_key_file or signing_key_dir)")
	}
	iss, _, err := openIssuer(m.dataDir, signingKeys{File: m.keyFile, Dir: m.keyDir}, m.issuer, m.audience)
	if err != nil {
		return err
	}
	var st store.Store
	if m.store == "" {
		st, err = openStore(cmd.Context(), m.dataDir)
	} else {
		st, _, err = openNamedStore(cmd.Context(), m.store, false)
	}
	if err != nil {
		return fmt.Errorf("%w (is a gateway running on this data dir? stop it first, or mint through it without --offline)", err)
	}
	defer func() { _ = st.Close() }()
	raw, rec, err := gateway.MintToken(cmd.Context(), iss, st, engine.Settings(), req)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), raw)
	fmt.Fprintf(cmd.ErrOrStderr(), "minted %s token %s for %q, expires %s (decision %s)\n", m.role, rec.JTI, rec.Subject, rec.ExpiresAt.UTC().Format(time.RFC3339), d.ID)
	return nil
}

func newTokenListCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List operator and agent tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListTokens(cmd.Context())
			if err != nil {
				return apiError(a, err)
			}
			w := cmd.OutOrStdout()
			if a.json() {
				return printJSON(w, map[string]any{"tokens": list})
			}
			if len(list) == 0 {
				fmt.Fprintln(w, "no tokens")
				return nil
			}
			if a.wide() {
				t := newTable(w, "ID", "ROLE", "SUBJECT", "LABEL", "CREATED", "EXPIRES", "LAST USED", "REVOKED", "QUOTA")
				for _, tk := range list {
					t.row(tk.ID, tk.Role, tk.Subject, tk.Label, tk.CreatedAt, tk.ExpiresAt, tk.LastUsed, tk.RevokedAt, quotaText(tk.Quota))
				}
				return t.flush()
			}
			// 100 columns: times relative to now, the creation time in -o
			// wide; the subject and label are cut to fit.
			now := time.Now()
			t := newTable(w, "ID", "ROLE", "SUBJECT", "LABEL", "EXPIRES", "LAST USED", "REVOKED", "QUOTA").fit(maxTableWidth, 2, 3)
			for _, tk := range list {
				t.row(tk.ID, tk.Role, tk.Subject, tk.Label, ago(tk.ExpiresAt, now), ago(tk.LastUsed, now), ago(tk.RevokedAt, now), quotaText(tk.Quota))
			}
			return t.flush()
		},
	}
}

// quotaText is an agent token's quota, "" without one.
func quotaText(q *client.Quota) string {
	if q == nil {
		return ""
	}
	return strconv.FormatInt(q.MaxLiveSandboxes, 10)
}

func newTokenRevokeCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: it is refused from the next request on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return apiError(a, err)
			}
			if !a.json() {
				fmt.Fprintf(cmd.OutOrStdout(), "revoked token %s\n", args[0])
			}
			return nil
		},
	}
}
