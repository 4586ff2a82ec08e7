package gatewaytest

import "sandgate/gateway/apitest"

// API is the gateway's API as tests speak it, over URL, failing the test
// New was given.
func (g *Gateway) API() *apitest.API { return &apitest.API{T: g.t, URL: g.URL} }

// Do is apitest.API.Do on the gateway.
func (g *Gateway) Do(method, path, token string, body any) apitest.Reply {
	g.t.Helper()
	return g.API().Do(method, path, token, body)
}

// DoWith is apitest.API.DoWith on the gateway.
func (g *Gateway) DoWith(r apitest.Request) apitest.Reply {
	g.t.Helper()
	return g.API().DoWith(r)
}

// Create is apitest.API.Create on the gateway: a sandbox, or the test
// fails.
func (g *Gateway) Create(token string, body any) apitest.Created {
	g.t.Helper()
	return g.API().Create(token, body)
}

// Exec is apitest.API.Exec on the gateway: a 200, or the test fails.
func (g *Gateway) Exec(token, id string, body any) apitest.Reply {
	g.t.Helper()
	return g.API().Exec(token, id, body)
}
