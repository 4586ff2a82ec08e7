package isolation

import (
	"bytes"
	_ "embed" // the script template
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

//go:embed isolation.sh.tmpl
var scriptTemplate string

// tmpl is parsed once; a template that does not parse is a build defect
// that every test catches, so it is reported by Script, not by a panic.
var tmpl, tmplErr = template.New("isolation.sh").Funcs(template.FuncMap{
	"sq":         shellQuote,
	"join":       strings.Join,
	"chainRules": func(d scriptData) []Rule { return d.chainRules() },
	"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
	"step":       stepCall,
	"ruleCall":   ruleCall,
	"words":      words,
	"metaPairs":  metaPairs,
}).Option("missingkey=error").Parse(scriptTemplate)

// inspectFormat is the `docker network inspect --format` whose output the
// script compares with the plan's network (networkWant).
const inspectFormat = `{{.Driver}}|{{range .IPAM.Config}}{{.Subnet}}|{{.Gateway}}{{end}}|` +
	`{{index .Options "com.docker.network.bridge.name"}}|{{index .Options "com.docker.network.bridge.enable_icc"}}|` +
	`{{.EnableIPv6}}|{{index .Labels "sandgate.isolation"}}|{{index .Labels "sandgate.resolvers"}}`

// scriptData is what the template sees: the plan, the two values derived
// from it for `docker network inspect`, and the probe root of a test
// rendering (ScriptWithProbeRoot); both are empty in every other rendering.
type scriptData struct {
	*Plan
	InspectFormat string
	NetworkWant   string
	// ProbeRoot is the directory the control-plane indicators of a test
	// rendering read instead of this host; Probe is the shell word the
	// template puts in front of every host path they read ("$PROBE_ROOT").
	ProbeRoot, Probe string
}

func (d scriptData) chainRules() []Rule {
	var out []Rule
	for _, r := range d.Rules {
		if r.Chain == d.Chain {
			out = append(out, r)
		}
	}
	return out
}

// Script renders the bash script that carries out the plan. Its
// control-plane indicators read this host itself; nothing at run time (no
// flag, no environment variable) can point them elsewhere.
func (p *Plan) Script() ([]byte, error) { return p.script("") }

// ScriptWithProbeRoot is a test seam, never used by the CLI: it renders the
// script as Script does, except that every control-plane indicator reads its
// facts under root instead of this host: root/proc/PID/cmdline (the running
// agents), root/proc/net/{tcp,tcp6,udp,udp6} (the listeners),
// root/proc/sys/kernel/hostname (instead of uname -n), and root followed by
// the Nomad config dir and by each -config path. It lets a test --apply the
// bundle for real on a host that runs a Nomad server of its own (a
// developer's, an end-to-end suite's), which Script rightly refuses. Every
// indicator still runs, and fails closed, against root's facts; the script
// says in its header and on stderr, at every run, that it does not check the
// host it runs on. root must be an absolute, clean path other than "/".
func (p *Plan) ScriptWithProbeRoot(root string) ([]byte, error) {
	if root == "" || root == "/" || !pathRe.MatchString(root) || filepath.Clean(root) != root {
		return nil, fmt.Errorf("isolation: probe root %q: want an absolute, clean path other than /, of [A-Za-z0-9/._+@:-]", root)
	}
	return p.script(root)
}

func (p *Plan) script(probeRoot string) ([]byte, error) {
	if tmplErr != nil {
		return nil, fmt.Errorf("isolation: script template: %w", tmplErr)
	}
	n := p.Network
	d := scriptData{
		Plan:          p,
		InspectFormat: inspectFormat,
		NetworkWant: strings.Join([]string{n.Driver, n.Subnet, n.Gateway, n.Bridge,
			fmt.Sprint(n.InterContainer), fmt.Sprint(n.IPv6), n.Labels["sandgate.isolation"],
			n.Labels["sandgate.resolvers"]}, "|"),
		ProbeRoot: probeRoot,
	}
	if probeRoot != "" {
		d.Probe = `"$PROBE_ROOT"`
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("isolation: render script: %w", err)
	}
	return buf.Bytes(), nil
}

// Render validates cfg, builds its plan and renders the script.
func Render(cfg Config) (*Plan, []byte, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := p.Script()
	if err != nil {
		return nil, nil, err
	}
	return p, s, nil
}

// stepCall renders the script line that carries out one apply or remove
// step: ensure_chain/delete_chain, ensure_rule/delete_rule with the rule's
// exact arguments, or network_step.
func stepCall(action string, d scriptData, s Step) (string, error) {
	switch s.Kind {
	case "chain":
		return action + "_chain " + shellWord(s.Name), nil
	case "network":
		return "network_step " + action, nil
	case "rule":
		r, ok := d.Rule(s.Name)
		if !ok {
			return "", fmt.Errorf("step names rule %q, which the plan lacks", s.Name)
		}
		return ruleCall(action, r), nil
	}
	return "", fmt.Errorf("step of unknown kind %q", s.Kind)
}

// ruleCall renders `<action>_rule CHAIN POSITION ARGS...`.
func ruleCall(action string, r Rule) string {
	words := append([]string{action + "_rule", r.Chain, r.Position}, r.Args()...)
	for i, w := range words {
		words[i] = shellWord(w)
	}
	return strings.Join(words, " ")
}

// words renders a list as shell words separated by spaces.
func words(v any) string {
	var out []string
	switch v := v.(type) {
	case []string:
		for _, s := range v {
			out = append(out, shellQuote(s))
		}
	case []int:
		for _, n := range v {
			out = append(out, strconv.Itoa(n))
		}
	}
	return strings.Join(out, " ")
}

// metaPairs lists key=value for every value of every key, sorted by key.
func metaPairs(m map[string][]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		for _, v := range m[k] {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// plainWord is a word the shell reads as itself.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:,=+@%-]+$`)

// shellWord quotes w only when the shell needs it.
func shellWord(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	return shellQuote(w)
}

// shellQuote single-quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
