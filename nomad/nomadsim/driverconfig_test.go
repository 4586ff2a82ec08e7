package nomadsim

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The docker driver types ulimit and labels as list(map(string)). A real
// v1.6.5 client with Docker registered an object there and then failed the
// task at start; these are the texts it reported.
const (
	ulimitObjectError = "2 errors occurred:\n\t* failed to parse config: \n\t* Incorrect attribute value type: Inappropriate value for attribute \"ulimit\": list of map of string required.\n\n"
	labelsObjectError = "2 errors occurred:\n\t* failed to parse config: \n\t* Incorrect attribute value type: Inappropriate value for attribute \"labels\": list of map of string required.\n\n"
	bothObjectsError  = "3 errors occurred:\n\t* failed to parse config: \n\t* Incorrect attribute value type: Inappropriate value for attribute \"ulimit\": list of map of string required.\n\t* Incorrect attribute value type: Inappropriate value for attribute \"labels\": list of map of string required.\n\n"
)

// hardenedJob is a batch docker job without restarts or reschedules, like
// the jobs sandgate renders, with the given ulimit and labels config.
func hardenedJob(id string, ulimit, labels any) *api.Job {
	job := sandboxJob(id, "worker-1")
	job.Type = new(api.JobTypeBatch)
	tg := job.TaskGroups[0]
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new(api.RestartPolicyModeFail)}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	tg.Tasks[0].SetConfig("ulimit", ulimit).SetConfig("labels", labels)
	return job
}

func TestDockerConfigIsCheckedWhenTheTaskStarts(t *testing.T) {
	t.Parallel()
	ulimit := map[string]string{"nofile": "1024:1024", "nproc": "512:512"}
	labels := map[string]string{"sandgate.sandbox_id": "k7x2m9p4q8r5t1v6"}
	for _, tc := range []struct {
		name     string
		job      *api.Job
		wantErr  string // "" means the task runs
		restarts string // the Not Restarting reason
	}{
		{name: "a ulimit object fails the task at start", job: hardenedJob("u", ulimit, []any{labels}),
			wantErr: ulimitObjectError, restarts: "Policy allows no restarts"},
		{name: "a labels object fails the task at start", job: hardenedJob("l", []any{ulimit}, labels),
			wantErr: labelsObjectError, restarts: "Policy allows no restarts"},
		{name: "both as objects are reported in one validation error", job: hardenedJob("b", ulimit, labels),
			wantErr: bothObjectsError, restarts: "Policy allows no restarts"},
		{name: "an object with restarts allowed is not restarted either (unrecoverable)", job: func() *api.Job {
			j := hardenedJob("r", ulimit, []any{labels})
			j.TaskGroups[0].RestartPolicy.Attempts = new(2)
			return j
		}(), wantErr: ulimitObjectError, restarts: "Error was unrecoverable"},
		{name: "lists of one map run", job: hardenedJob("ok", []any{ulimit}, []any{labels})},
		{name: "a list of two maps runs (the agent merges them)", job: hardenedJob("two",
			[]any{map[string]string{"nofile": "1024:1024"}, map[string]string{"nproc": "512:512"}}, []any{labels})},
		{name: "no ulimit and no labels run", job: hardenedJob("none", nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, url, c := newSim(t)
			register(t, c, tc.job)
			var alloc *api.Allocation
			waitFor(t, "the allocation to leave pending", func() bool {
				stubs, _, err := c.Jobs().Allocations(*tc.job.ID, false, nil)
				if err != nil || len(stubs) == 0 || stubs[0].ClientStatus == "pending" {
					return false
				}
				alloc, _, err = c.Allocations().Info(stubs[0].ID, nil)
				return err == nil
			})
			ts := alloc.TaskStates["sandbox"]
			if tc.wantErr == "" {
				if alloc.ClientStatus != "running" || ts.State != "running" || ts.Failed {
					t.Fatalf("alloc %s (%s), task %s failed=%t, want running: %+v",
						alloc.ClientStatus, alloc.ClientDescription, ts.State, ts.Failed, eventTypes(ts))
				}
				return
			}
			if alloc.ClientStatus != "failed" || alloc.ClientDescription != "Failed tasks" || alloc.DesiredStatus != "run" {
				t.Errorf("alloc %s %q desired %s, want failed \"Failed tasks\" desired run",
					alloc.ClientStatus, alloc.ClientDescription, alloc.DesiredStatus)
			}
			if ts.State != "dead" || !ts.Failed || ts.Restarts != 0 || !ts.StartedAt.IsZero() || ts.FinishedAt.IsZero() {
				t.Errorf("task %s failed=%t restarts=%d started %v finished %v, want dead, failed, never started",
					ts.State, ts.Failed, ts.Restarts, ts.StartedAt, ts.FinishedAt)
			}
			if got, want := eventTypes(ts), []string{"Received", "Task Setup", "Failed Validation", "Not Restarting"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			v, nr := ts.Events[2], ts.Events[3]
			if v.DisplayMessage != tc.wantErr || v.ValidationError != tc.wantErr || v.Details["validation_error"] != tc.wantErr || v.FailsTask {
				t.Errorf("Failed Validation event %+v, want message %q", v, tc.wantErr)
			}
			if nr.DisplayMessage != tc.restarts || nr.RestartReason != tc.restarts || !nr.FailsTask ||
				!reflect.DeepEqual(nr.Details, map[string]string{"restart_reason": tc.restarts, "fails_task": "true"}) {
				t.Errorf("Not Restarting event %+v, want reason %q failing the task", nr, tc.restarts)
			}
			job, _, err := c.Jobs().Info(*tc.job.ID, nil)
			if err != nil || *job.Status != "dead" {
				t.Errorf("job status %v (%v), want dead", deref(job.Status), err)
			}
			sum, _, err := c.Jobs().Summary(*tc.job.ID, nil)
			if err != nil || sum.Summary["sandbox"].Failed != 1 || sum.Summary["sandbox"].Running != 0 {
				t.Errorf("summary %+v (%v), want one failed", sum.Summary, err)
			}
			// On the wire a task that never started has StartedAt null.
			var wire struct {
				TaskStates map[string]map[string]any
			}
			getJSON(t, url+"/v1/allocation/"+alloc.ID, &wire)
			if st := wire.TaskStates["sandbox"]; st["StartedAt"] != nil || st["FinishedAt"] == nil {
				t.Errorf("wire StartedAt %v FinishedAt %v, want null and a time", st["StartedAt"], st["FinishedAt"])
			}
		})
	}
}

func eventTypes(ts *api.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, e.Type)
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the test's own simulator
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
