//go:build sandgate_testhooks

package testhook_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/testhook"
)

// The test build reads its environment once, at the first Pause: TestMain
// sets it before any test runs.
var pauseFile, outFile string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "testhook-")
	if err != nil {
		panic(err)
	}
	pauseFile, outFile = filepath.Join(dir, "pause"), filepath.Join(dir, "out")
	_ = os.Setenv(testhook.EnvPause, string(testhook.EndRecorded))
	_ = os.Setenv(testhook.EnvPauseFile, pauseFile)
	_ = os.Setenv(testhook.EnvOut, outFile)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// pauses reports whether Pause(p) blocks (it is left blocked: the
// goroutine leaks, as the paused process is meant to be killed).
func pauses(p testhook.Point) bool {
	done := make(chan struct{})
	go func() { testhook.Pause(p); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(200 * time.Millisecond):
		return true
	}
}

func TestATestBuildPausesAtTheArmedPointsOnly(t *testing.T) {
	if !testhook.Enabled {
		t.Fatal("built without sandgate_testhooks")
	}
	if pauses(testhook.CreateReserved) {
		t.Fatal("an unarmed point paused")
	}
	if !pauses(testhook.EndRecorded) {
		t.Fatal("the point of the environment did not pause")
	}
	if err := os.WriteFile(pauseFile, []byte(" create.reserved\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !pauses(testhook.CreateReserved) {
		t.Fatal("the point of the pause file did not pause")
	}
	if err := os.WriteFile(pauseFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if pauses(testhook.CreateReserved) {
		t.Fatal("a disarmed point paused")
	}
	out, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	want := testhook.PausedLine(testhook.EndRecorded) + "\n" + testhook.PausedLine(testhook.CreateReserved) + "\n"
	if string(out) != want {
		t.Fatalf("pause lines %q, want %q", out, want)
	}
	if !strings.HasPrefix(want, "TESTHOOK paused ") {
		t.Fatal(want)
	}
}
