package crash

import (
	"bytes"
	"os"
	"testing"

	"sandgate/gateway/testhook"
)

// TestTheProductionBinaryHasNoTestHooks: built without the tag, the binary
// holds neither the pause line nor the variables that arm it, nor a point's
// name; built with it, it holds all three (so the check looks at the
// right text).
func TestTheProductionBinaryHasNoTestHooks(t *testing.T) {
	t.Parallel()
	plain, err := build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hooked, err := hookedBinary()
	if err != nil {
		t.Fatal(err)
	}
	marks := []string{testhook.PausedLine(""), testhook.EnvPauseFile, string(testhook.CreateReserved)}
	for bin, want := range map[string]bool{plain: false, hooked: true} {
		b, err := os.ReadFile(bin) //nolint:gosec // G304: a binary this test built
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marks {
			if got := bytes.Contains(b, []byte(m)); got != want {
				t.Errorf("%s: holds %q: %v, want %v", bin, m, got, want)
			}
		}
	}
}
