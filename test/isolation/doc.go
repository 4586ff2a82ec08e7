// Package isolation holds the real tests of the host isolation bundle (rules
// I1-I4): as root, the script rendered by render/isolation runs with real
// iptables inside network namespaces the tests create, and with a real
// Docker engine where one runs. Real packets prove each drop, with a
// positive control before --apply and after --remove. Test traffic only
// ever goes to addresses of the tests' own namespaces or of this host, each
// routed explicitly; nothing can leave the machine. No test depends on what
// else runs on this host: a script run in a test netns sees its own pid
// namespace only (pidns_test.go), and the Docker test, which applies in this
// host's own netns, uses the test rendering whose control-plane indicators
// read a fake worker (proberoot_test.go).
package isolation
