//go:build sandgate_testhooks

package testhook

import (
	"os"
	"strings"
	"sync"
)

// Enabled reports whether this build pauses at armed points: true, a
// build with the tag sandgate_testhooks.
const Enabled = true

// env is the test build's configuration, read once. Reading the
// environment here, outside cmd/, is confined to this test-only file.
var env = sync.OnceValue(func() struct{ pause, file, out string } {
	return struct{ pause, file, out string }{os.Getenv(EnvPause), os.Getenv(EnvPauseFile), os.Getenv(EnvOut)}
})

// Pause blocks the calling goroutine forever, after writing PausedLine(p),
// when p is armed (see the package documentation); otherwise it returns.
func Pause(p Point) {
	if !armed(p) {
		return
	}
	line := []byte(PausedLine(p) + "\n")
	if out := env().out; out != "" {
		if f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			_, _ = f.Write(line)
			_ = f.Close()
		}
	} else {
		_, _ = os.Stderr.Write(line)
	}
	select {}
}

// armed reports whether p is the point of the environment or the pause file.
func armed(p Point) bool {
	e := env()
	if e.pause != "" && Point(e.pause) == p {
		return true
	}
	if e.file == "" {
		return false
	}
	b, err := os.ReadFile(e.file)
	return err == nil && Point(strings.TrimSpace(string(b))) == p
}
