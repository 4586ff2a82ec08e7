package nomadsim

import "net/http/httptest"

// TB is the part of testing.TB that NewTestServer needs. It is declared here
// so that production builds of this package do not import "testing".
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// NewTestServer starts a simulator for cfg on an httptest server, points the
// nodes' HTTPAddr at it and registers a cleanup that closes both. It returns
// the server and its base URL (http://127.0.0.1:port) for api.Config.Address.
func NewTestServer(tb TB, cfg Config) (*Server, string) {
	tb.Helper()
	s, err := New(cfg)
	if err != nil {
		tb.Fatalf("nomadsim: %v", err)
		return nil, ""
	}
	ts := httptest.NewServer(s.Handler())
	s.SetAddress(ts.Listener.Addr().String())
	tb.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts.URL
}
