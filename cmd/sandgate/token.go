package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway/token"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Operator and agent tokens"}
	cmd.AddCommand(newTokenMintCmd())
	return cmd
}

func newTokenMintCmd() *cobra.Command {
	var (
		role, dataDir, keyFile, subject, label, issuer, audience, policyDir string
		ttl                                                                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mint --role operator|agent --ttl DUR --data DIR",
		Short: "Mint an operator or agent token offline, with the gateway's signing key",
		Long: `Mint a token with the signing key of the data dir and record it in the
store (a token the store does not know is refused). The store is a single
file locked by a running gateway: run this while the gateway is stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := token.Role(role)
			if r != token.RoleOperator && r != token.RoleAgent {
				return fmt.Errorf("--role must be operator or agent, not %q", role)
			}
			if ttl <= 0 {
				return errors.New("--ttl must be positive, e.g. 24h")
			}
			if subject == "" {
				subject = role + "-" + time.Now().UTC().Format("20060102T150405")
			}
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			iss, _, err := openIssuer(dataDir, keyFile, issuer, audience)
			if err != nil {
				return err
			}
			st, err := openStore(dataDir)
			if err != nil {
				return fmt.Errorf("%w (is a gateway running on this data dir? stop it first)", err)
			}
			defer func() { _ = st.Close() }()
			raw, claims, err := mintRecorded(cmd.Context(), iss, st, engine.Settings(), r, subject, label, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), raw)
			fmt.Fprintf(cmd.ErrOrStderr(), "minted %s token %s for %q, expires %s\n", role, claims.ID, subject, claims.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "operator or agent")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "lifetime, e.g. 24h")
	f.StringVar(&dataDir, "data", "./.sandgate", "the gateway's data dir")
	f.StringVar(&keyFile, "key-file", "", "signing key (default <data>/signing.key)")
	f.StringVar(&subject, "subject", "", "the token's subject (sub); agents' sandboxes are owned by it")
	f.StringVar(&label, "label", "", "a label shown when tokens are listed")
	f.StringVar(&issuer, "issuer", "", "iss claim (default sandgate)")
	f.StringVar(&audience, "audience", "", "aud claim (default sandgate-api)")
	addPolicyDirFlag(cmd, &policyDir)
	return cmd
}
