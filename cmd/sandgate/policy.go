package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway/audit"
	"sandgate/gateway/client"
	"sandgate/gateway/escape"
	"sandgate/gateway/replay"
	"sandgate/policies"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Inspect, test and evaluate the Rego policy bundle",
	}
	cmd.AddCommand(newPolicyEvalCmd(), newPolicyInfoCmd(), newPolicyTestCmd(), newPolicyBuildCmd(), newPolicyAuditCmd(), newPolicyReplayCmd(),
		newPolicyReplayWorkerCmd())
	return cmd
}

// evalOutput is what `sandgate policy eval` prints.
type evalOutput struct {
	Allow      bool                 `json:"allow"`
	Violations []policies.Violation `json:"violations"`
	Revision   string               `json:"revision"`
	DecisionID string               `json:"decision_id"`
	DurationUS int64                `json:"duration_us"`
}

func newPolicyEvalCmd() *cobra.Command {
	var entrypoint, input, request, policyDir string
	var api *apiFlags
	cmd := &cobra.Command{
		Use:   "eval (--entrypoint authz|admission|... --input FILE|- | --request FILE|-)",
		Short: "Evaluate one decision on an input document, or dry-run a request on a gateway",
		Long: `Evaluate one entrypoint of the bundle on a JSON input document and print
{allow, violations, revision, decision_id, duration_us}.

With --request, ask a running gateway (--addr, an operator or reviewer token)
what it would decide if a caller sent this request: the file holds
{"method", "path", "token_claims": {"role", "sub", "scopes", "sandbox_id"},
"body"}, and the gateway builds the input with exactly the code a live request
goes through (its router, the route's body decoding, the target sandbox's
record), decides it with the bundle in force and changes nothing
(POST /v1/policy/evaluate). The built input is printed too.

Exit status: 0 allowed, 3 denied, 1 error (unreadable input, policy error).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if request != "" {
				if entrypoint != "" || input != "" || policyDir != "" {
					return errors.New("--request asks a gateway; it takes no --entrypoint, --input or --policy-dir")
				}
				return dryRunRequest(cmd, api, request)
			}
			if entrypoint == "" || input == "" {
				return errors.New("--entrypoint and --input are required (or --request)")
			}
			ep, err := policies.ParseEntrypoint(entrypoint)
			if err != nil {
				return err
			}
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			r, closeInput, err := openInput(cmd, input)
			if err != nil {
				return err
			}
			defer closeInput()
			in, err := policies.ParseInput(r)
			if err != nil {
				return err
			}
			d, err := engine.Decide(cmd.Context(), ep, in)
			if err != nil {
				return fmt.Errorf("decision %s (revision %s) failed, which is a deny: %w", d.ID, d.Revision, err)
			}
			out, err := json.Marshal(evalOutput{
				Allow: d.Allow, Violations: d.Violations, Revision: d.Revision,
				DecisionID: d.ID, DurationUS: d.Duration.Microseconds(),
			})
			if err != nil {
				return err
			}
			if err := writeIndented(cmd, out); err != nil {
				return err
			}
			if !d.Allow {
				return errDenied
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&entrypoint, "entrypoint", "", "entrypoint: authz, admission, lifecycle, hosts, reclaim or isolation")
	cmd.Flags().StringVar(&input, "input", "", "input document: a JSON file, or - for stdin")
	cmd.Flags().StringVar(&request, "request", "", "a request to dry-run on the gateway at --addr: a JSON file, or - for stdin")
	addPolicyDirFlag(cmd, &policyDir)
	api = addAPIFlags(cmd)
	return cmd
}

// openInput opens a file, or stdin for "-".
func openInput(cmd *cobra.Command, name string) (io.Reader, func(), error) {
	if name == "-" {
		return cmd.InOrStdin(), func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

// dryRunRequest sends the request in file to the gateway's dry run.
func dryRunRequest(cmd *cobra.Command, api *apiFlags, file string) error {
	r, closeInput, err := openInput(cmd, file)
	if err != nil {
		return err
	}
	defer closeInput()
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	var req client.DryRequest
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("--request: want {method, path, token_claims, body}: %w", err)
	}
	cl, err := api.client()
	if err != nil {
		return err
	}
	ev, err := cl.EvaluateRequest(cmd.Context(), req)
	if err != nil {
		return err
	}
	out, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := writeIndented(cmd, out); err != nil {
		return err
	}
	if !ev.Allow {
		return errDenied
	}
	return nil
}

func newPolicyInfoCmd() *cobra.Command {
	var policyDir, format string
	cmd := &cobra.Command{
		Use:   "info [--format text|json|markdown]",
		Short: "Print the bundle revision, digest and every rule that can deny",
		Long: `Print the bundle revision, its digest (the one GET /v1/policy reports for the
bundle in force, so a reviewer can tell whether it is the one reviewed) and
every rule that can deny: its rule id, title, severity and entrypoint.
Loading fails if any such rule lacks its METADATA (title, description,
custom.id, custom.severity).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			info := engine.Info()
			rules := info.Rules
			switch format {
			case "text":
			case "markdown":
				return writeRuleTable(cmd.OutOrStdout(), info.Revision, rules)
			case "json":
				doc, err := json.Marshal(struct {
					Revision        string          `json:"revision"`
					Digest          string          `json:"digest"`
					DigestAlgorithm string          `json:"digest_algorithm"`
					Rules           []policies.Rule `json:"rules"`
				}{info.Revision, info.Digest, policies.DigestAlgorithm, rules})
				if err != nil {
					return err
				}
				return writeIndented(cmd, doc)
			default:
				return fmt.Errorf("--format %q: want text, json or markdown", format)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "revision\t%s\n", info.Revision)
			fmt.Fprintf(w, "digest\t%s (%s)\n\n", info.Digest, policies.DigestAlgorithm)
			fmt.Fprintln(w, "ID\tSEVERITY\tENTRYPOINT\tTITLE")
			for _, r := range rules {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.ID, r.Severity, r.Entrypoint, r.Title)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, json (with descriptions and locations) or markdown (the table in docs/policies.md)")
	addPolicyDirFlag(cmd, &policyDir)
	return cmd
}

func newPolicyTestCmd() *cobra.Command {
	var policyDir string
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Run the bundle's Rego tests in-process (as a reload does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fsys = policies.EmbeddedBundle()
			if policyDir != "" {
				fsys = os.DirFS(policyDir)
			}
			results, err := policies.RunTests(cmd.Context(), fsys)
			passed, failed := 0, 0
			for _, r := range results {
				if r.Pass {
					passed++
					continue
				}
				failed++
				fmt.Fprintf(cmd.OutOrStdout(), "FAIL %s.%s %s\n", r.Package, r.Name, r.Error)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d passed, %d failed\n", passed, failed)
			return err
		},
	}
	addPolicyDirFlag(cmd, &policyDir)
	return cmd
}

// writeRuleTable prints the rules as the markdown table docs/policies.md
// carries between its rule-table markers.
func writeRuleTable(w io.Writer, revision string, rules []policies.Rule) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Bundle revision `%s`: %d annotated rules that can deny.\n\n", revision, len(rules))
	b.WriteString("| id | entrypoint | severity | title | where |\n|---|---|---|---|---|\n")
	for _, r := range rules {
		loc := r.Location
		if i := strings.LastIndexByte(loc, ':'); i > 0 {
			loc = "`policies/" + loc[:i] + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.ID, r.Entrypoint, r.Severity, strings.ReplaceAll(r.Title, "|", "\\|"), loc)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newPolicyBuildCmd() *cobra.Command {
	var dir, revision, keyFile, alg, keyID, out string
	cmd := &cobra.Command{
		Use:   "build --dir DIR [--revision REV] [--signing-key KEY] -o bundle.tar.gz",
		Short: "Check, pack and sign a bundle directory into an OPA bundle file",
		Long: `Check the bundle in --dir as a reload would (it loads, compiles, every rule
carries its METADATA, its own Rego tests pass), then write it as an OPA bundle
tarball, tests included. With --signing-key (a PEM private key: RSA, ECDSA or
Ed25519) the bundle carries OPA's own .signatures.json, so 'opa build
--verification-key' verifies it as well as 'sandgate serve' with
policy.bundle_file and policy.verification_key. --key-id names the key in the
signature (default sandgate); the gateway's policy.verification_key_id must
name the same. Prints the revision and digest GET /v1/policy will report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || out == "" {
				return errors.New("--dir and -o are required")
			}
			o := policies.BuildOptions{Dir: dir, Revision: revision, Algorithm: alg, KeyID: keyID}
			if keyFile != "" {
				key, err := os.ReadFile(keyFile)
				if err != nil {
					return fmt.Errorf("--signing-key: %w", err)
				}
				o.SigningKeyPEM = string(key)
			}
			var buf bytes.Buffer
			res, err := policies.Build(cmd.Context(), o, &buf)
			if err != nil {
				return err
			}
			// Written beside the target and renamed, so a gateway watching
			// the file never reads half a bundle.
			if err := writeFileAtomic(out, buf.Bytes(), 0o644); err != nil {
				return err
			}
			signed := "unsigned"
			if res.Signed {
				signed = "signed by key id " + res.KeyID
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: revision %s, digest %s (%s), %s, %d bytes\n",
				out, res.Revision, res.Digest, policies.DigestAlgorithm, signed, res.Bytes)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the bundle directory (required)")
	cmd.Flags().StringVar(&revision, "revision", "", "the revision to write into the manifest (default: the directory's .manifest revision)")
	cmd.Flags().StringVar(&keyFile, "signing-key", "", "PEM private key to sign with (default: unsigned)")
	cmd.Flags().StringVar(&alg, "signing-alg", "", "JWS algorithm (default: the key's own, RS256, ES256/384/512 or EdDSA)")
	cmd.Flags().StringVar(&keyID, "key-id", "", "the key id the signature names (default "+policies.DefaultKeyID+")")
	cmd.Flags().StringVarP(&out, "output", "o", "", "the bundle file to write (required)")
	return cmd
}

// writeFileAtomic writes data to a temporary file beside name and renames
// it over name.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// bundleFlags say which bundle a command loads: the embedded one, a
// directory, or a bundle file verified by a public key.
type bundleFlags struct{ dir, file, key, keyID string }

func (f *bundleFlags) add(cmd *cobra.Command) {
	addPolicyDirFlag(cmd, &f.dir)
	cmd.Flags().StringVar(&f.file, "bundle", "", "load a bundle file (sandgate policy build) instead of the embedded copy")
	cmd.Flags().StringVar(&f.key, "verification-key", "", "PEM public key the --bundle must be signed with")
	cmd.Flags().StringVar(&f.keyID, "verification-key-id", "", "the key id the signature must name (default "+policies.DefaultKeyID+")")
}

func (f *bundleFlags) config() (policies.Config, error) {
	cfg := policies.Config{Dir: f.dir, BundleFile: f.file}
	if f.key != "" {
		key, err := os.ReadFile(f.key)
		if err != nil {
			return cfg, fmt.Errorf("--verification-key: %w", err)
		}
		cfg.Verify = &policies.Verification{KeyPEM: string(key), KeyID: f.keyID}
	}
	return cfg, nil
}

func newPolicyAuditCmd() *cobra.Command {
	var bf bundleFlags
	var format string
	cmd := &cobra.Command{
		Use:   "audit [--policy-dir DIR | --bundle FILE]",
		Short: "List every known-dangerous job or request the bundle would admit",
		Long: `Decide the built-in escape corpus with the bundle: variations of a rendered
job (privileged, added capabilities, the Docker socket, host paths and devices,
host network, services and ports, workload identity, a priority in the apps'
band, a job without the prefix, a control-plane node, ...) and of requests
(token scope escapes), and cases generated from every profile in the bundle's
data: a profile that adds a capability beyond the workspace set (CHOWN,
DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETFCAP), or a strict
profile with a capability or a writable root, is a case the bundle must
refuse. Prints every case with the rule that refuses it, or ADMITTED. The gateway runs the same audit at start and at every reload and
refuses a bundle that admits any case the operator has not accepted by its
id (policy.accept_escapes).

Exit status: 0 nothing admitted, 3 something admitted, 1 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := bf.config()
			if err != nil {
				return err
			}
			engine, err := policies.New(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("load policy bundle: %w", err)
			}
			r, err := escape.Audit(cmd.Context(), engine, nil)
			if err != nil {
				return err
			}
			// The fixed cases and those of the bundle's own profiles.
			cases := escape.CorpusFor(engine.Settings())
			admitted := map[string]bool{}
			for _, f := range r.Admitted {
				admitted[f.ID] = true
			}
			switch format {
			case "json":
				type row struct {
					ID       string `json:"id"`
					What     string `json:"what"`
					Rule     string `json:"rule"`
					Admitted bool   `json:"admitted"`
				}
				rows := []row{}
				for _, c := range cases {
					rows = append(rows, row{c.ID, c.What, c.Rule, admitted[c.ID]})
				}
				doc, err := json.Marshal(struct {
					Revision string `json:"revision"`
					Checked  int    `json:"checked"`
					Admitted int    `json:"admitted"`
					Cases    []row  `json:"cases"`
				}{r.Revision, r.Checked, len(r.Admitted), rows})
				if err != nil {
					return err
				}
				if err := writeIndented(cmd, doc); err != nil {
					return err
				}
			case "text":
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "CASE\tRULE\tRESULT")
				for _, c := range cases {
					result := "refused"
					if admitted[c.ID] {
						result = "ADMITTED"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", c.ID, c.Rule, result)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "revision %s: %d cases, %d admitted\n", r.Revision, r.Checked, len(r.Admitted))
			default:
				return fmt.Errorf("--format %q: want text or json", format)
			}
			if len(r.Admitted) > 0 {
				return errDenied
			}
			return nil
		},
	}
	bf.add(cmd)
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	return cmd
}

func newPolicyReplayCmd() *cobra.Command {
	var candidate, key, keyID, since, until, format string
	var logs []string
	var limit int
	cmd := &cobra.Command{
		Use:   "replay --candidate DIR|bundle.tar.gz --log decisions.jsonl [--log ...] [--since T] [--until T]",
		Short: "Re-decide logged decisions under a candidate bundle and print what flips",
		Long: `Re-evaluate every decision of the decision log(s) that was logged with its input
(decision_log.include_inputs) under the candidate bundle, and print the flips:
allow->deny, deny->allow, and refusals whose rule ids change, grouped by rule id
with counts and example decision ids. Decisions without an input are counted as
skipped. Pass every file to replay: decisions.jsonl and its rotated copies
(decisions.jsonl.1 ...).

Exit status: 0 nothing loosened, 3 at least one logged refusal would now be
allowed (a reviewer's sign-off is due), 1 error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if candidate == "" || len(logs) == 0 {
				return errors.New("--candidate and --log are required")
			}
			var opts replay.Options
			for _, tf := range []struct {
				flag, value string
				into        *time.Time
			}{{"--since", since, &opts.Since}, {"--until", until, &opts.Until}} {
				if tf.value == "" {
					continue
				}
				t, err := time.Parse(time.RFC3339Nano, tf.value)
				if err != nil {
					return fmt.Errorf("%s: want an RFC 3339 time like 2026-12-01T09:00:00Z: %w", tf.flag, err)
				}
				*tf.into = t
			}
			opts.Limit = limit
			bf := bundleFlags{key: key, keyID: keyID}
			if st, err := os.Stat(candidate); err == nil && st.IsDir() {
				bf.dir = candidate
			} else {
				bf.file = candidate
			}
			cfg, err := bf.config()
			if err != nil {
				return err
			}
			engine, err := policies.New(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("load the candidate: %w", err)
			}
			r := replay.New(engine, opts)
			for _, name := range logs {
				if err := replayLog(cmd, r, name); err != nil {
					return err
				}
			}
			rep := r.Report()
			switch format {
			case "json":
				doc, err := json.Marshal(rep)
				if err != nil {
					return err
				}
				if err := writeIndented(cmd, doc); err != nil {
					return err
				}
			case "text":
				if err := writeReplay(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--format %q: want text or json", format)
			}
			if rep.Loosens() {
				return errDenied
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&candidate, "candidate", "", "the candidate bundle: a directory or a bundle file (required)")
	cmd.Flags().StringArrayVar(&logs, "log", nil, "a decision log file; repeat for rotated files (required)")
	cmd.Flags().StringVar(&key, "verification-key", "", "PEM public key a candidate bundle file must be signed with")
	cmd.Flags().StringVar(&keyID, "verification-key-id", "", "the key id its signature must name (default "+policies.DefaultKeyID+")")
	cmd.Flags().StringVar(&since, "since", "", "replay decisions from this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "replay decisions before this RFC 3339 time")
	cmd.Flags().IntVar(&limit, "limit", 0, "stop after this many replayed decisions (default: all)")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	return cmd
}

// newPolicyReplayWorkerCmd is the hidden `policy replay-worker`: the
// gateway re-executes itself with it to replay a candidate bundle in a
// child process bounded in memory and CPU time (POST /v1/policy/replay,
// docs/threat-model.md); it speaks JSON lines on stdin and stdout.
func newPolicyReplayWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    replay.WorkerArgs[1],
		Short:  "Replay a candidate for a gateway (internal: the gateway starts it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return replay.ServeWorker(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

func replayLog(cmd *cobra.Command, r *replay.Replayer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("--log: %w", err)
	}
	defer func() { _ = f.Close() }()
	skipped, err := audit.ReadFile(f, func(e audit.Entry) error { return r.Add(cmd.Context(), e) })
	if errors.Is(err, replay.ErrLimit) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if skipped > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d lines are not decisions and were skipped\n", name, skipped)
	}
	return nil
}

// writeReplay prints a replay report as a table.
func writeReplay(out io.Writer, rep replay.Report) error {
	skipped := 0
	for _, n := range rep.Skipped {
		skipped += n
	}
	fmt.Fprintf(out, "replayed %d decisions of revision %s under candidate %s: %d unchanged, %d skipped",
		rep.Replayed, strings.Join(rep.LoggedRevisions, ", "), rep.CandidateRevision, rep.Unchanged, skipped)
	if skipped > 0 {
		var why []string
		for reason, n := range rep.Skipped {
			why = append(why, fmt.Sprintf("%s %d", reason, n))
		}
		slices.Sort(why)
		fmt.Fprintf(out, " (%s)", strings.Join(why, ", "))
	}
	fmt.Fprintln(out)
	if rep.Truncated {
		fmt.Fprintln(out, "stopped at --limit")
	}
	if len(rep.Groups) == 0 {
		_, err := fmt.Fprintln(out, "no decision flips")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FLIP\tRULE\tCOUNT\tEXAMPLE DECISION IDS")
	for _, g := range rep.Groups {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", g.Kind, g.Rule, g.Count, strings.Join(g.Examples, ", "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if rep.Loosens() {
		_, err := fmt.Fprintf(out, "%d logged refusals would be allowed: a reviewer's sign-off is due\n", rep.Flips[replay.DenyToAllow])
		return err
	}
	return nil
}
