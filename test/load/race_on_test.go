//go:build race

package load

// raceEnabled: this test binary runs under the race detector.
const raceEnabled = true
