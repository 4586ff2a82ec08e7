package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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

// call is a direct API call, to check what the dashboard did.
func (g *gateway) call(t *testing.T, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(data, &m) // empty or non-JSON bodies leave m nil
	return resp.StatusCode, m
}
