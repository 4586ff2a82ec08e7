package testhook_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"sandgate/gateway/testhook"
)

func TestEveryPointHasAUniqueDottedName(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`^(create|destroy|end)\.[a-z_]+$`)
	seen := map[testhook.Point]bool{}
	for _, p := range testhook.Points {
		if !name.MatchString(string(p)) {
			t.Errorf("point %q is not <create|destroy|end>.<step>", p)
		}
		if seen[p] {
			t.Errorf("point %q is listed twice", p)
		}
		seen[p] = true
	}
	if len(seen) < 10 {
		t.Fatalf("only %d points", len(seen))
	}
}

// TestTheProductionBuildNeverPauses: without the build tag an armed point
// returns at once (the environment is not even read).
func TestTheProductionBuildNeverPauses(t *testing.T) {
	if testhook.Enabled {
		t.Skip("built with sandgate_testhooks")
	}
	file := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(file, []byte(testhook.CreateReserved), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testhook.EnvPause, string(testhook.CreateReserved))
	t.Setenv(testhook.EnvPauseFile, file)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range testhook.Points {
			testhook.Pause(p)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Pause blocked in a build without the sandgate_testhooks tag")
	}
}
