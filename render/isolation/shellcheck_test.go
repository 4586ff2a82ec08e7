package isolation

import (
	"bytes"
	"os/exec"
	"testing"
)

// The rendered scripts pass shellcheck (Debian's shellcheck package) with
// every check enabled at its default severity.
func TestTheScriptsAreShellcheckClean(t *testing.T) {
	t.Parallel()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed (apt-get install -y shellcheck)")
	}
	for name, probeRoot := range map[string]string{"default": "", "overlays and extra ports": "", "probe-root test rendering": "/tmp/probe-root"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			if name == "overlays and extra ports" {
				cfg = overlayConfig()
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			script, err := p.Script()
			if probeRoot != "" {
				script, err = p.ScriptWithProbeRoot(probeRoot)
			}
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(sc, "--shell=bash", "--external-sources", "-")
			cmd.Stdin = bytes.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("shellcheck: %v\n%s", err, out)
			}
		})
	}
}

// bash itself parses the script (a syntax error would otherwise only show
// when an operator runs it).
func TestBashParsesTheScript(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	_, script, err := Render(overlayConfig())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = bytes.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
}
