package browser_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/test/testbin"
)

// gateway is a running `sandgate dev` on the Nomad simulator.
type gateway struct {
	url      string
	operator string
}

// simulatorEnv is the environment without NOMAD_*: the dashboard test
// always runs on the simulator, never on a cluster NOMAD_ADDR names.
func simulatorEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOMAD_") {
			env = append(env, kv)
		}
	}
	return env
}

func startGateway(t *testing.T, bin string) *gateway {
	t.Helper()
	d := testbin.StartDev(t, bin, testbin.Options{Env: simulatorEnv()})
	g := &gateway{url: d.URL, operator: d.Operator}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _ := g.call(t, http.MethodGet, "/readyz", "", nil)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after 20 s", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return g
}

// browserHTTP bounds each direct API call.
var browserHTTP = &http.Client{Timeout: 30 * time.Second}

// api is the gateway's API as t speaks it.
func (g *gateway) api(t *testing.T) *apitest.API {
	return &apitest.API{T: t, URL: g.url, HTTP: browserHTTP}
}

// call is a direct API call, to check what the dashboard did: the status
// and the body as a JSON object (nil when the body is empty or not one).
func (g *gateway) call(t *testing.T, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	r := g.api(t).Do(method, path, tok, body)
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return r.Status, m
}
