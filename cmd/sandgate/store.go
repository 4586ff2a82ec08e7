package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"sandgate/gateway/assemble"
	"sandgate/store"
	"sandgate/store/maintain"
	"sandgate/store/postgres"
)

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Move a gateway's records to another store, and check a store (offline)",
		Long: `Offline upkeep of a gateway's store. A store is named as

  bolt:DIR         the bbolt file of a data dir (DIR/sandgate.db), or bolt:FILE
  postgres:DSN     a PostgreSQL database, e.g. postgres:postgres://sandgate@db:5432/sandgate
  postgres:        the database SANDGATE_STORE_DSN names (keeps the password off the command line)

A bbolt file is locked while its gateway runs: stop the gateway first.`,
	}
	cmd.AddCommand(newStoreMigrateCmd(), newStoreCheckCmd())
	return cmd
}

func newStoreMigrateCmd() *cobra.Command {
	var from, to, format string
	cmd := &cobra.Command{
		Use:   "migrate --from bolt:DIR --to postgres:DSN",
		Short: "Move every record, token, idempotency key and node of a stopped gateway into an empty store",
		Long: `Move every sandbox record (with its rendered job and idempotency key), every
token and every node enrollment of a stopped gateway's store into another
store, which must be empty, then check that the target holds what the source
held: the records in each state, the nodes, the tokens and the budget in use
on each node. The source is left as it was.

Moving from one gateway on bbolt to several on PostgreSQL (docs/deploy.md):

  sandgate store migrate --from bolt:/var/lib/sandgate --to postgres:
  sandgate store check postgres:`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ctx := cmd.Context()
			src, srcName, err := openNamedStore(ctx, from, true)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			defer func() { _ = src.Close() }()
			dst, dstName, err := openNamedStore(ctx, to, false)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			defer func() { _ = dst.Close() }()
			target, ok := dst.(store.Importer)
			if !ok {
				return fmt.Errorf("--to: %s cannot take imported records (move into a postgres store)", dstName)
			}
			inv, err := maintain.Move(ctx, src, target)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), map[string]any{"from": srcName, "to": dstName, "moved": inv})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "moved %d records (%s), %d nodes and %d tokens\n  from %s\n  to   %s\n",
				inv.Records(), stateCounts(inv.States), inv.Nodes, inv.Tokens, srcName, dstName)
			fmt.Fprintln(w, "the target holds what the source held: records per state, nodes, tokens and the live use of every node agree")
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the store to move from: bolt:DIR (required)")
	cmd.Flags().StringVar(&to, "to", "", "the empty store to move into: postgres:DSN (required)")
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: table or json")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func newStoreCheckCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "check STORE",
		Short: "Report a store's schema version and whether its budgets and counts equal its records",
		Long: `Read every record of a store and compare what the store derives from them:
the budget in use on every node and by every principal must equal the sum over
their live records, and the count of each state the number of records in it.
Nothing is written. Exits 1 when anything disagrees, listing each problem.

  sandgate store check bolt:/var/lib/sandgate
  SANDGATE_STORE_DSN=postgres://sandgate@db/sandgate sandgate store check postgres:`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ctx := cmd.Context()
			s, name, err := openNamedStore(ctx, args[0], true)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			r, err := maintain.Check(ctx, s)
			if err != nil {
				return err
			}
			if format == "json" {
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"store": name, "check": r}); err != nil {
					return err
				}
			} else {
				printCheck(cmd.OutOrStdout(), name, r)
			}
			if len(r.Problems) > 0 {
				return &exitCodeError{code: exitError, err: fmt.Errorf("%d problems", len(r.Problems)), silent: format == "json"}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: table or json")
	return cmd
}

func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("-o %q: want table or json", format)
	}
	return nil
}

func printCheck(w io.Writer, name string, r maintain.Report) {
	fmt.Fprintf(w, "store     %s\n", name)
	if r.SchemaKnown != 0 {
		fmt.Fprintf(w, "schema    %d (this sandgate knows %d)\n", r.Schema, r.SchemaKnown)
	}
	fmt.Fprintf(w, "records   %d (%s)\n", r.Records(), stateCounts(r.States))
	fmt.Fprintf(w, "nodes     %d\ntokens    %d\n", r.Nodes, r.Tokens)
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "consistent: every budget and count equals what the records hold")
		return
	}
	fmt.Fprintf(w, "INCONSISTENT: %d problems\n", len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

func stateCounts(m map[store.State]int64) string {
	parts := make([]string, 0, 4)
	for _, st := range store.States() {
		parts = append(parts, fmt.Sprintf("%s %d", st, m[st]))
	}
	return strings.Join(parts, ", ")
}

// openNamedStore opens the store a name gives (bolt:DIR, bolt:FILE,
// postgres:DSN, postgres: for SANDGATE_STORE_DSN) and returns it with a
// name to print that holds no password. With existing, a bbolt file that
// is not there is an error rather than a new, empty file.
func openNamedStore(ctx context.Context, spec string, existing bool) (store.Store, string, error) {
	driver, arg, ok := strings.Cut(spec, ":")
	if strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://") {
		driver, arg, ok = assemble.DriverPostgres, spec, true // a bare URL
	}
	if !ok {
		return nil, "", fmt.Errorf("%q: want bolt:DIR or postgres:DSN", spec)
	}
	c := assemble.DefaultConfig()
	switch driver {
	case assemble.DriverBolt:
		if arg == "" {
			return nil, "", errors.New("bolt: needs the data dir, as bolt:DIR")
		}
		path := arg
		if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
			path = filepath.Join(arg, assemble.StoreFile)
		}
		if _, err := os.Stat(path); existing && err != nil {
			return nil, "", fmt.Errorf("bolt: %w", err)
		}
		c.Store.Path = path
		s, err := assemble.OpenStore(ctx, c)
		return s, "bolt:" + path, err
	case assemble.DriverPostgres:
		dsn := arg
		if dsn == "" {
			if dsn = os.Getenv(envStoreDSN); dsn == "" {
				return nil, "", fmt.Errorf("postgres: with no DSN reads %s, which is unset", envStoreDSN)
			}
		}
		c.Store.Driver, c.Store.DSN = assemble.DriverPostgres, dsn
		s, err := assemble.OpenStore(ctx, c)
		if err != nil {
			return nil, "", err
		}
		name := "postgres"
		if p, ok := s.(*postgres.Store); ok {
			name = "postgres:" + p.Target()
		}
		return s, name, nil
	}
	return nil, "", fmt.Errorf("%q: unknown store %q (want bolt:DIR or postgres:DSN)", spec, driver)
}
