package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway/token"
)

func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage the token signing keys of a key directory (signing_key_dir)",
		Long: `Manage a key directory: the token signing keys of a gateway configured with
signing_key_dir. Every key in it verifies tokens; the one its "active" file
names signs them. A gateway reads the directory when it starts and on SIGHUP:
after a change, send every gateway on it SIGHUP or restart it (copies of one
directory on every replica).

Rotate without refusing a live token (docs/runbook.md, "Rotate the signing key"):
  1. sandgate key generate --dir DIR       the new key verifies; reload every replica
  2. sandgate key activate --dir DIR KID   the new key signs; reload every replica
  3. sandgate key retire --dir DIR OLDKID  once the old key's tokens have expired
     (sandgate key list says when); reload every replica`,
	}
	cmd.AddCommand(newKeyGenerateCmd(), newKeyListCmd(), newKeyActivateCmd(), newKeyRetireCmd())
	return cmd
}

func newKeyGenerateCmd() *cobra.Command {
	var dir string
	var activate bool
	cmd := &cobra.Command{
		Use:   "generate --dir DIR [--activate]",
		Short: "Write a new signing key (0600, named by its kid) into a key directory",
		Long: `Write a new Ed25519 signing key into DIR (created 0700 when missing) as
<kid>.pem, mode 0600, and print its kid. The first key of a directory becomes
the active one; any later one only verifies until 'sandgate key activate'. With
--activate it signs at once: only for a new directory, or to replace a key that
leaked, since a replica that does not know the key yet refuses its tokens.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required")
			}
			k, err := token.CreateKey(dir)
			if err != nil {
				return err
			}
			d, err := token.ReadKeyDir(dir)
			if err != nil {
				return err
			}
			first := d.Active == "" && len(d.Keys) == 1
			if activate || first {
				if err := token.Activate(dir, k.KID); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.KID)
			w := cmd.ErrOrStderr()
			switch {
			case first:
				fmt.Fprintf(w, "wrote %s; the directory's first key, it is active\n", k.Path)
			case activate:
				fmt.Fprintf(w, "wrote %s and made it active; reload (SIGHUP) every gateway on %s\n", k.Path, dir)
			default:
				fmt.Fprintf(w, "wrote %s; it verifies, and signs once activated: reload (SIGHUP) every gateway on %s, then sandgate key activate --dir %s %s\n",
					k.Path, dir, dir, k.KID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the key directory (the gateway's signing_key_dir)")
	cmd.Flags().BoolVar(&activate, "activate", false, "make the new key the active one at once")
	return cmd
}

// keyListFlags are the flags of key list and key retire: the directory and
// the longest token lifetime.
type keyListFlags struct {
	dir, policyDir string
	maxLifetime    time.Duration
}

func (f *keyListFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "dir", "", "the key directory (the gateway's signing_key_dir)")
	cmd.Flags().DurationVar(&f.maxLifetime, "max-token-lifetime", 0,
		"the longest lifetime of a token (default: the policy's, the larger of tokens.max_ttl_seconds and lifetime.ceiling_seconds)")
	addPolicyDirFlag(cmd, &f.policyDir)
}

// lifetime is --max-token-lifetime, else the policy's longest token
// lifetime: an operator, agent or reviewer token lives at most
// tokens.max_ttl_seconds, a session token at most its sandbox's
// lifetime.ceiling_seconds. The verification leeway is added.
func (f *keyListFlags) lifetime(cmd *cobra.Command) (time.Duration, error) {
	if f.maxLifetime < 0 {
		return 0, errors.New("--max-token-lifetime must be positive")
	}
	if f.maxLifetime > 0 {
		return f.maxLifetime + token.MaxLeeway, nil
	}
	e, err := loadEngine(cmd, f.policyDir)
	if err != nil {
		return 0, err
	}
	s := e.Settings()
	return time.Duration(max(s.Tokens.MaxTTLSeconds, s.Lifetime.CeilingSeconds))*time.Second + token.MaxLeeway, nil
}

// retirement says when a key stops having live tokens. The times are the
// files': the active file's since the active key signs, a key file's since
// it was written.
type retirement struct {
	active bool
	// from is when the key may be retired; zero: now (it never signed
	// since it was written, or no key signs).
	from time.Time
	note string
}

func retirementOf(d token.KeyDir, k token.DirKey, lifetime time.Duration, now time.Time) retirement {
	switch {
	case k.KID == d.Active:
		return retirement{active: true, note: "signs; activate another key before retiring it"}
	case d.Active == "":
		return retirement{note: "no active key"}
	case k.ModTime.After(d.ActiveSince):
		return retirement{note: "verifies only; written after the last activation, it never signed"}
	}
	from := d.ActiveSince.Add(lifetime)
	if now.Before(from) {
		return retirement{from: from, note: fmt.Sprintf("verifies only; its tokens may live until %s: retire after that",
			from.UTC().Format(time.RFC3339))}
	}
	return retirement{note: "verifies only; may be retired: every token it signed has expired"}
}

func newKeyListCmd() *cobra.Command {
	f := &keyListFlags{}
	cmd := &cobra.Command{
		Use:   "list --dir DIR [--max-token-lifetime DUR]",
		Short: "List the keys of a key directory: kid, written, active, when it may be retired",
		Long: `List the keys of DIR: kid, when the file was written, whether it is the active
key, and when a key that no longer signs may be retired: once the longest token
lifetime has passed since another key became active. The times are the files'
(keep them when copying the directory: cp -p, rsync -t).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.dir == "" {
				return errors.New("--dir is required")
			}
			d, err := token.ReadKeyDir(f.dir)
			if err != nil {
				return err
			}
			lifetime, err := f.lifetime(cmd)
			if err != nil {
				return err
			}
			return printKeys(cmd.OutOrStdout(), d, lifetime, time.Now())
		},
	}
	f.add(cmd)
	return cmd
}

func printKeys(w io.Writer, d token.KeyDir, lifetime time.Duration, now time.Time) error {
	if len(d.Keys) == 0 {
		fmt.Fprintf(w, "no keys in %s (sandgate key generate --dir %s)\n", d.Dir, d.Dir)
		return nil
	}
	t := newTable(w, "KID", "ACTIVE", "WRITTEN", "NOTE")
	for _, k := range d.Keys {
		r := retirementOf(d, k, lifetime, now)
		active := "no"
		if r.active {
			active = "yes"
		}
		t.row(k.KID, active, k.ModTime.UTC().Format(time.RFC3339), r.note)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if d.Active != "" {
		if _, ok := d.Key(d.Active); !ok {
			fmt.Fprintf(w, "the active file names %s, which no key has: a gateway on %s will not start\n", d.Active, d.Dir)
		}
	} else {
		fmt.Fprintf(w, "no key is active: a gateway on %s will not start (sandgate key activate --dir %s KID)\n", d.Dir, d.Dir)
	}
	return nil
}

func newKeyActivateCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "activate --dir DIR KID",
		Short: "Make a key of a key directory the one that signs",
		Long: `Make the key KID of DIR the one that signs new tokens; the others keep
verifying. Activate a key only once every gateway knows it (generated into each
replica's copy of DIR and reloaded), or a replica that does not refuses the
tokens the others sign. Then reload (SIGHUP) every gateway on DIR.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return errors.New("--dir is required")
			}
			if err := token.Activate(dir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is the active key of %s; reload (SIGHUP) every gateway on it\n", args[0], dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the key directory (the gateway's signing_key_dir)")
	return cmd
}

func newKeyRetireCmd() *cobra.Command {
	f := &keyListFlags{}
	var force bool
	cmd := &cobra.Command{
		Use:   "retire --dir DIR KID [--force]",
		Short: "Delete a key of a key directory: the tokens it signed are refused",
		Long: `Delete the key KID from DIR. Once the gateways on DIR reload, every token it
signed is refused. The active key cannot be retired. A key that signed within
the longest token lifetime (sandgate key list) is refused too unless --force:
use it to retire a key that leaked, and mint new tokens for its holders.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.dir == "" {
				return errors.New("--dir is required")
			}
			kid := args[0]
			d, err := token.ReadKeyDir(f.dir)
			if err != nil {
				return err
			}
			if k, ok := d.Key(kid); ok && !force && kid != d.Active {
				lifetime, err := f.lifetime(cmd)
				if err != nil {
					return err
				}
				if r := retirementOf(d, k, lifetime, time.Now()); !r.from.IsZero() {
					return fmt.Errorf("%s may still have live tokens until %s (the longest token lifetime, %s, after %s became active); retire it then, or now with --force",
						kid, r.from.UTC().Format(time.RFC3339), lifetime, d.Active)
				}
			}
			k, err := token.Retire(f.dir, kid)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "retired %s: deleted %s; reload (SIGHUP) every gateway on %s, and its tokens are refused\n", kid, k.Path, f.dir)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&force, "force", false, "retire even though tokens it signed may still be live (a key that leaked)")
	return cmd
}
