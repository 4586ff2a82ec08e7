// Package image tests the container image of sandgate itself: `make image`
// builds it FROM scratch with no registry, and the image runs the binary as
// a non-root user.
//
// Without a reachable Docker engine (or make) every test skips with one line
// saying which; SANDGATE_E2E=require (set by .ci/run) turns that skip into a
// failure, as in test/e2e.
package image
