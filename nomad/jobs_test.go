package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// testJob is a minimal raw_exec job with the given ID.
func testJob(id string) *api.Job {
	job := api.NewServiceJob(id, id, "global", 50)
	job.AddTaskGroup(api.NewTaskGroup("g", 1).AddTask(api.NewTask("main", "raw_exec")))
	return job
}

func TestRegisterReturnsTheEvaluation(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	fx := loadFixture(t, "docker-job-register")
	var sent api.JobRegisterRequest
	r.handle("PUT", "/v1/jobs", func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(b, &sent); err != nil {
			t.Errorf("register body: %v", err)
		}
		fx.write(w)
	})
	evalID, err := r.client().Register(context.Background(), testJob(dockerJob))
	if err != nil || evalID != recEvalID {
		t.Fatalf("Register = %q, %v; want %q", evalID, err, recEvalID)
	}
	if sent.Job == nil || deref(sent.Job.ID) != dockerJob {
		t.Fatalf("register sent %+v", sent.Job)
	}
}

func TestRegisterOfAnInvalidJobIsA500(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("error-register-no-task-groups")
	_, err := r.client().Register(context.Background(), api.NewServiceJob("sandbox-bad", "sandbox-bad", "global", 50))
	var e *Error
	if !errors.As(err, &e) || e.Status != 500 || !errors.Is(err, ErrUnavailable) || e.Op != OpRegister {
		t.Fatalf("Register = %v, want *Error status 500 ErrUnavailable", err)
	}
	if !strings.Contains(e.Msg, "Missing job task groups") {
		t.Fatalf("Msg = %q, want Nomad's multierror text", e.Msg)
	}
}

func TestRegisterRefusesJobsOutsideThePrefixWithoutARequest(t *testing.T) {
	t.Parallel()
	otherNS := testJob("sandbox-ns")
	otherNS.Namespace = new("prod")
	badName := testJob("sandbox-name")
	badName.Name = new("other-name")
	tests := []struct {
		name string
		job  *api.Job
	}{
		{"an ID without the prefix", testJob("other-job")},
		{"an ID that is only the prefix", testJob(testPrefix)},
		{"a prefixed ID with a foreign name", badName},
		{"a job in another namespace", otherNS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReplay(t)
			_, err := r.client().Register(context.Background(), tt.job)
			if !errors.Is(err, ErrForbiddenJob) {
				t.Fatalf("Register = %v, want ErrForbiddenJob", err)
			}
			if n := len(r.requests()); n != 0 {
				t.Fatalf("%d requests reached Nomad", n)
			}
		})
	}
}

func TestJobReadsStatusAndStop(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("docker-job")
	j, err := r.client().Job(context.Background(), dockerJob)
	if err != nil || j != (JobInfo{ID: dockerJob, Status: "pending"}) {
		t.Fatalf("Job = %+v, %v", j, err)
	}
}

func TestAnUnknownJobIsNotFound(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	fx := loadFixture(t, "error-job-unknown") // recorded for /v1/job/no-such-job
	r.handle("GET", "/v1/job/sandbox-gone", func(w http.ResponseWriter, _ *http.Request) { fx.write(w) })
	_, err := r.client().Job(context.Background(), "sandbox-gone")
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.Status != 404 || e.Msg != "job not found" {
		t.Fatalf("Job = %#v, want ErrNotFound with Nomad's message", err)
	}
}

func TestListJobsKeepsOnlyPrefixedJobs(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	fx := loadFixture(t, "jobs-list")
	var stubs []map[string]any
	if err := json.Unmarshal(fx.body(), &stubs); err != nil {
		t.Fatal(err)
	}
	// A server that ignores ?prefix= (a proxy, an old simulator) must not
	// leak other jobs.
	stubs = append(stubs, map[string]any{"ID": "other-job", "Status": "running"}, map[string]any{"ID": testPrefix, "Status": "running"})
	r.handle("GET", "/v1/jobs", func(w http.ResponseWriter, req *http.Request) {
		if got := req.URL.Query().Get("prefix"); got != testPrefix {
			t.Errorf("prefix query = %q, want %q", got, testPrefix)
		}
		_ = json.NewEncoder(w).Encode(stubs)
	})
	jobs, err := r.client().ListJobs(context.Background())
	if err != nil || len(jobs) != 1 || jobs[0] != (JobInfo{ID: dockerJob, Status: "pending"}) {
		t.Fatalf("ListJobs = %+v, %v", jobs, err)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	t.Run("purges with purge=true", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		r.serve("rawexec-job-purge")
		if err := r.client().Purge(context.Background(), rawexecJob); err != nil {
			t.Fatal(err)
		}
		if got := r.requests()[0].Query.Get("purge"); got != "true" {
			t.Fatalf("purge query = %q", got)
		}
	})
	t.Run("an unknown job is success", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		fx := loadFixture(t, "error-job-purge-unknown") // Nomad 1.6 answers 200
		r.handle("DELETE", "/v1/job/sandbox-gone", func(w http.ResponseWriter, _ *http.Request) { fx.write(w) })
		if err := r.client().Purge(context.Background(), "sandbox-gone"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a 404 is success too", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		r.handle("DELETE", "/v1/job/sandbox-gone", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "job not found", http.StatusNotFound)
		})
		if err := r.client().Purge(context.Background(), "sandbox-gone"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a job without the prefix is refused before any request", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		for _, id := range []string{"no-such-job", "", testPrefix, "Sandbox-docker"} {
			if err := r.client().Purge(context.Background(), id); !errors.Is(err, ErrForbiddenJob) {
				t.Fatalf("Purge(%q) = %v, want ErrForbiddenJob", id, err)
			}
		}
		if n := len(r.requests()); n != 0 {
			t.Fatalf("%d requests reached Nomad", n)
		}
	})
}

func TestAllocationReadsAndChecksTheJob(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("rawexec-allocation", "error-allocation-unknown", "rawexec-job-allocations")
	c := r.client()
	ctx := context.Background()
	want := Alloc{ID: recAllocID, NodeID: recNodeID, NodeName: "<hostname>", JobID: rawexecJob, Name: "sandbox-rawexec.g[0]", CreateIndex: 19, ClientStatus: "running", DesiredStatus: "run"}
	a, err := c.Allocation(ctx, recAllocID)
	if err != nil || a != want {
		t.Fatalf("Allocation = %+v, %v", a, err)
	}
	if _, err := c.Allocation(ctx, unknownID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Allocation(unknown) = %v, want ErrNotFound", err)
	}
	list, err := c.JobAllocations(ctx, rawexecJob)
	if err != nil || len(list) != 1 || list[0] != want {
		t.Fatalf("JobAllocations = %+v, %v", list, err)
	}
	foreign := newReplay(t)
	foreign.serve("rawexec-allocation")
	c2 := foreign.client(func(c *Config) { c.JobPrefix = "sandgate-sbx-" })
	if _, err := c2.Allocation(ctx, recAllocID); !errors.Is(err, ErrForbiddenJob) {
		t.Fatalf("Allocation of a foreign job = %v, want ErrForbiddenJob", err)
	}
}
