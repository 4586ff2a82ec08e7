// Package test holds sandgate's black-box and integration tests: they use
// the packages only through their exported API, as the gateway does.
package test
