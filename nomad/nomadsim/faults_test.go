package nomadsim

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFaultsApplyByMethodAndPathPrefixForTheirTimes(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t)

	s.InjectFault(Fault{Method: "PUT", PathPrefix: "/v1/jobs", Status: 500, Body: "rpc error: no leader", Times: 2})
	for i := 0; i < 2; i++ {
		r := do(t, "PUT", url+"/v1/jobs", `{}`)
		if r.status != 500 || string(r.body) != "rpc error: no leader" {
			t.Fatalf("faulted register %d: %d %q", i, r.status, r.body)
		}
	}
	if r := do(t, "GET", url+"/v1/jobs", nil); r.status != 200 {
		t.Errorf("GET matched a PUT fault: %d", r.status)
	}
	if resp := register(t, c, sandboxJob("after", "worker-1")); resp.EvalID == "" {
		t.Error("fault outlived its Times")
	}

	s.InjectFault(Fault{PathPrefix: "/v1/nodes", Latency: 150 * time.Millisecond, Times: 1})
	start := time.Now()
	if r := do(t, "GET", url+"/v1/nodes", nil); r.status != 200 {
		t.Errorf("latency fault changed the response: %d", r.status)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("latency fault took %v", d)
	}

	s.InjectFault(Fault{PathPrefix: "/v1/agent/self", Drop: true})
	if _, err := c.Agent().Self(); err == nil {
		t.Error("dropped request succeeded")
	} else if !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Logf("dropped request error: %v", err)
	}
	if _, err := c.Agent().Self(); err == nil {
		t.Error("Times 0 fault applied only once")
	}
	s.ClearFaults()
	if _, err := c.Agent().Self(); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}

	// Faults apply to the exec upgrade too.
	s.InjectFault(Fault{PathPrefix: "/v1/client/allocation/", Status: http.StatusBadGateway, Body: "boom", Times: 1})
	r := do(t, "GET", url+"/v1/client/allocation/x/exec", nil)
	if r.status != http.StatusBadGateway {
		t.Errorf("exec fault: %d", r.status)
	}
}

func TestRequestsAreCountedAndLogged(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t)
	s.ResetRequests()
	if _, _, err := c.Nodes().List(nil); err != nil {
		t.Fatal(err)
	}
	do(t, "GET", url+"/v1/job/x?index=5&wait=1s", nil)
	do(t, "DELETE", url+"/v1/job/x?purge=true", nil)
	if n := s.Requests(); n != 3 {
		t.Errorf("Requests() = %d, want 3", n)
	}
	want := []string{"GET /v1/nodes", "GET /v1/job/x", "DELETE /v1/job/x"}
	if got := s.RequestLog(); !reflect.DeepEqual(got, want) {
		t.Errorf("RequestLog() = %q, want %q", got, want)
	}
	s.ResetRequests()
	if s.Requests() != 0 || len(s.RequestLog()) != 0 {
		t.Error("ResetRequests did not reset")
	}
}

func TestBlockingQueryParametersAreAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	_, url, _ := newSim(t)
	start := time.Now()
	r := do(t, "GET", url+"/v1/jobs?index=999999&wait=5m", nil)
	if r.status != 200 || time.Since(start) > time.Second || r.header.Get("X-Nomad-Index") == "" {
		t.Errorf("blocking query: %d after %v, index %q", r.status, time.Since(start), r.header.Get("X-Nomad-Index"))
	}
}

func TestMethodsARouteDoesNotServeAreRefused(t *testing.T) {
	t.Parallel()
	_, url, _ := newSim(t)
	for _, req := range [][2]string{{"POST", "/v1/nodes"}, {"DELETE", "/v1/allocation/x"}, {"PATCH", "/v1/jobs"}, {"PUT", "/v1/node/x"}} {
		if r := do(t, req[0], url+req[1], nil); r.status != http.StatusMethodNotAllowed || string(r.body) != "Invalid method" {
			t.Errorf("%s %s: %d %q", req[0], req[1], r.status, r.body)
		}
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no nodes":        {},
		"unnamed node":    {Nodes: []NodeConfig{{}}},
		"duplicate name":  {Nodes: []NodeConfig{{Name: "a"}, {Name: "a"}}},
		"duplicate id":    {Nodes: []NodeConfig{{Name: "a", ID: "x"}, {Name: "b", ID: "x"}}},
		"bad status":      {Nodes: []NodeConfig{{Name: "a", Status: "asleep"}}},
		"bad eligibility": {Nodes: []NodeConfig{{Name: "a", Eligibility: "maybe"}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close() // idempotent
}
