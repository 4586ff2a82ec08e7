package nomadsim

import (
	"fmt"
	"net/http/httptest"
	"sort"

	"github.com/hashicorp/nomad/api"
)

// Example starts the default three-node simulator, points the real
// nomad/api client at it and lists the nodes.
func Example() {
	sim, err := New(DefaultConfig())
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(sim.Handler())
	sim.SetAddress(ts.Listener.Addr().String()) // exec and logs dial the node's HTTPAddr
	defer ts.Close()
	defer sim.Close()

	client, err := api.NewClient(&api.Config{Address: ts.URL})
	if err != nil {
		panic(err)
	}
	nodes, _, err := client.Nodes().List(nil)
	if err != nil {
		panic(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name+" "+n.Status+" "+n.SchedulingEligibility)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// control-1 ready eligible
	// worker-1 ready eligible
	// worker-2 ready eligible
}

// ExampleServer_InjectFault makes the next job registration fail with a 500.
func ExampleServer_InjectFault() {
	sim, err := New(DefaultConfig())
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(sim.Handler())
	defer ts.Close()
	defer sim.Close()
	sim.InjectFault(Fault{Method: "PUT", PathPrefix: "/v1/jobs", Status: 500, Body: "no cluster leader", Times: 1})

	client, _ := api.NewClient(&api.Config{Address: ts.URL})
	job := api.NewServiceJob("demo", "demo", "global", 50)
	job.AddTaskGroup(api.NewTaskGroup("g", 1).AddTask(api.NewTask("t", "docker")))
	_, _, err = client.Jobs().Register(job, nil)
	fmt.Println(err)
	_, _, err = client.Jobs().Register(job, nil)
	fmt.Println(err, sim.Requests())
	// Output:
	// Unexpected response code: 500 (no cluster leader)
	// <nil> 2
}
