package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// TestBlockedDockerJobFollowsTheRecordedLifecycle walks the recorded
// sandbox-docker story on a node without docker: accepted, blocked with
// "missing drivers", no allocation, purged, blocked eval canceled.
func TestBlockedDockerJobFollowsTheRecordedLifecycle(t *testing.T) {
	t.Parallel()
	_, url, c := newSim(t, recordingCluster)

	regRec := loadRecording(t, "docker-job-register")
	reg := replay(t, url, regRec)
	reg.checkAgainst(t, regRec, "register")
	regBody := decode[map[string]any](t, reg.body)
	evalID := regBody["EvalID"].(string)
	if regBody["Warnings"] != "" {
		t.Errorf("Warnings = %v, want empty string", regBody["Warnings"])
	}

	jobRec := loadRecording(t, "docker-job")
	job := do(t, "GET", url+"/v1/job/sandbox-docker", nil)
	job.checkAgainst(t, jobRec, "job")
	jobObj := firstObject(t, job.body)
	assertSameShape(t, "job", jobObj, jobRec.object(t))
	if jobObj["Status"] != "pending" {
		t.Errorf("job status %v, want pending", jobObj["Status"])
	}
	tg := jobObj["TaskGroups"].([]any)[0].(map[string]any)
	recTG := jobRec.object(t)["TaskGroups"].([]any)[0].(map[string]any)
	assertSameShape(t, "task group", tg, recTG)
	assertSameShape(t, "task", tg["Tasks"].([]any)[0].(map[string]any), recTG["Tasks"].([]any)[0].(map[string]any))

	listRec := loadRecording(t, "jobs-list")
	list := do(t, "GET", url+"/v1/jobs", nil)
	list.checkAgainst(t, listRec, "jobs list")
	assertSameShape(t, "jobs list", firstObject(t, list.body), listRec.object(t))

	allocsRec := loadRecording(t, "docker-job-allocations")
	allocs := do(t, "GET", url+"/v1/job/sandbox-docker/allocations", nil)
	allocs.checkAgainst(t, allocsRec, "allocations")
	if !jsonEqual(t, allocs.body, allocsRec.Body) {
		t.Errorf("allocations %s, want []", allocs.body)
	}

	sumRec := loadRecording(t, "docker-job-summary")
	sum := do(t, "GET", url+"/v1/job/sandbox-docker/summary", nil)
	sum.checkAgainst(t, sumRec, "summary")
	gotSum, wantSum := firstObject(t, sum.body), sumRec.object(t)
	assertSameShape(t, "summary", gotSum, wantSum)
	if !jsonEqualValues(gotSum["Summary"], wantSum["Summary"]) {
		t.Errorf("summary %v, recorded %v", gotSum["Summary"], wantSum["Summary"])
	}

	failedRec := loadRecording(t, "docker-evaluation-placement-failed")
	ev := do(t, "GET", url+"/v1/evaluation/"+evalID, nil)
	ev.checkAgainst(t, failedRec, "eval")
	evObj, wantEv := firstObject(t, ev.body), failedRec.object(t)
	assertSameShape(t, "placement-failed eval", evObj, wantEv)
	assertMetricMatches(t, evObj, wantEv)
	for _, k := range []string{"Status", "TriggeredBy", "Type", "Priority", "QueuedAllocations"} {
		if !jsonEqualValues(evObj[k], wantEv[k]) {
			t.Errorf("eval %s = %v, recorded %v", k, evObj[k], wantEv[k])
		}
	}
	blockedID := evObj["BlockedEval"].(string)

	blockedRec := loadRecording(t, "docker-evaluation-blocked")
	bl := do(t, "GET", url+"/v1/evaluation/"+blockedID, nil)
	blObj, wantBl := firstObject(t, bl.body), blockedRec.object(t)
	assertSameShape(t, "blocked eval", blObj, wantBl)
	assertMetricMatches(t, blObj, wantBl)
	for _, k := range []string{"Status", "StatusDescription", "TriggeredBy", "EscapedComputedClass"} {
		if !jsonEqualValues(blObj[k], wantBl[k]) {
			t.Errorf("blocked eval %s = %v, recorded %v", k, blObj[k], wantBl[k])
		}
	}
	if blObj["PreviousEval"] != evalID {
		t.Errorf("blocked eval PreviousEval = %v, want %s", blObj["PreviousEval"], evalID)
	}

	relRec := loadRecording(t, "docker-evaluation-related")
	rel := firstObject(t, do(t, "GET", url+"/v1/evaluation/"+evalID+"?related=true", nil).body)
	assertSameShape(t, "related eval", rel, relRec.object(t))
	relStubs := rel["RelatedEvals"].([]any)
	if len(relStubs) != 1 {
		t.Fatalf("RelatedEvals = %v", relStubs)
	}
	assertSameShape(t, "related stub", relStubs[0].(map[string]any), relRec.object(t)["RelatedEvals"].([]any)[0].(map[string]any))

	evalsRec := loadRecording(t, "docker-job-evaluations")
	evals := do(t, "GET", url+"/v1/job/sandbox-docker/evaluations", nil)
	evals.checkAgainst(t, evalsRec, "evaluations")
	assertEvalListShape(t, evals.body, evalsRec.Body)

	// The api client agrees.
	summary, _, err := c.Jobs().Summary("sandbox-docker", nil)
	if err != nil || summary.Summary["sandbox"].Queued != 1 {
		t.Errorf("api summary %+v, %v", summary, err)
	}

	purgeRec := loadRecording(t, "docker-job-purge")
	purge := replay(t, url, purgeRec)
	purge.checkAgainst(t, purgeRec, "purge")
	purgeObj := firstObject(t, purge.body)
	assertSameShape(t, "purge", purgeObj, purgeRec.object(t))

	afterRec := loadRecording(t, "docker-job-after-purge")
	after := do(t, "GET", url+"/v1/job/sandbox-docker", nil)
	after.checkAgainst(t, afterRec, "after purge")
	if string(after.body) != afterRec.raw(t) {
		t.Errorf("after purge body %q", after.body)
	}

	canceledRec := loadRecording(t, "docker-evaluation-blocked-after-purge")
	canceled := firstObject(t, do(t, "GET", url+"/v1/evaluation/"+blockedID, nil).body)
	assertSameShape(t, "canceled eval", canceled, canceledRec.object(t))
	wantDesc := fmt.Sprintf("evaluation %q successful", purgeObj["EvalID"])
	if canceled["Status"] != "canceled" || canceled["StatusDescription"] != wantDesc {
		t.Errorf("blocked eval after purge: %v %q, want canceled %q", canceled["Status"], canceled["StatusDescription"], wantDesc)
	}
}

func jsonEqualValues(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return string(ab) == string(bb)
}

// assertMetricMatches compares FailedTGAllocs with the recording, except
// AllocationTime (a duration).
func assertMetricMatches(t *testing.T, got, want map[string]any) {
	t.Helper()
	g := got["FailedTGAllocs"].(map[string]any)["sandbox"].(map[string]any)
	w := want["FailedTGAllocs"].(map[string]any)["sandbox"].(map[string]any)
	assertSameShape(t, "FailedTGAllocs.sandbox", g, w)
	for k := range w {
		if k != "AllocationTime" && !jsonEqualValues(g[k], w[k]) {
			t.Errorf("FailedTGAllocs.sandbox.%s = %v, recorded %v", k, g[k], w[k])
		}
	}
}

// assertEvalListShape matches each listed eval with the recorded one of the
// same Status.
func assertEvalListShape(t *testing.T, got, want []byte) {
	t.Helper()
	g := decode[[]map[string]any](t, got)
	w := decode[[]map[string]any](t, want)
	if len(g) != len(w) {
		t.Fatalf("%d evaluations, recorded %d", len(g), len(w))
	}
	for _, ge := range g {
		for _, we := range w {
			if we["Status"] == ge["Status"] {
				assertSameShape(t, "listed eval "+ge["Status"].(string), ge, we)
			}
		}
	}
}

// TestRawExecJobFollowsTheRecordedLifecycle registers the recorded raw_exec
// job, waits for its allocation to run, and purges it: the allocation
// stays readable as complete/stop.
func TestRawExecJobFollowsTheRecordedLifecycle(t *testing.T) {
	t.Parallel()
	_, url, c := newSim(t, recordingCluster)
	reg := decode[map[string]any](t, replay(t, url, loadRecording(t, "rawexec-job-register")).body)
	if reg["EvalID"] == "" {
		t.Fatalf("register: %v", reg)
	}
	var allocID string
	waitFor(t, "running allocation", func() bool {
		stubs, _, err := c.Jobs().Allocations("sandbox-rawexec", false, nil)
		if err != nil || len(stubs) != 1 {
			return false
		}
		allocID = stubs[0].ID
		return stubs[0].ClientStatus == "running"
	})

	allocRec := loadRecording(t, "rawexec-allocation")
	alloc := do(t, "GET", url+"/v1/allocation/"+allocID, nil)
	alloc.checkAgainst(t, allocRec, "allocation")
	allocObj, wantAlloc := firstObject(t, alloc.body), allocRec.object(t)
	assertSameShape(t, "allocation", allocObj, wantAlloc)
	assertSameShape(t, "allocation task state", taskState(allocObj), taskState(wantAlloc))
	assertSameShape(t, "allocation job", allocObj["Job"].(map[string]any), wantAlloc["Job"].(map[string]any))
	for _, k := range []string{"ClientStatus", "ClientDescription", "DesiredStatus", "Name", "TaskGroup", "JobID", "NodeID"} {
		if !jsonEqualValues(allocObj[k], wantAlloc[k]) {
			t.Errorf("allocation %s = %v, recorded %v", k, allocObj[k], wantAlloc[k])
		}
	}
	if taskState(allocObj)["State"] != "running" {
		t.Errorf("task state %v", taskState(allocObj))
	}

	stubRec := loadRecording(t, "rawexec-job-allocations")
	stubs := do(t, "GET", url+"/v1/job/sandbox-rawexec/allocations", nil)
	stubs.checkAgainst(t, stubRec, "job allocations")
	assertSameShape(t, "allocation stub", firstObject(t, stubs.body), stubRec.object(t))

	nodeAllocRec := loadRecording(t, "node-allocations")
	nodeAllocs := replay(t, url, nodeAllocRec)
	nodeAllocs.checkAgainst(t, nodeAllocRec, "node allocations")
	assertSameShape(t, "node allocation", firstObject(t, nodeAllocs.body), nodeAllocRec.object(t))

	statsRec := loadRecording(t, "rawexec-allocation-stats")
	stats := do(t, "GET", url+"/v1/client/allocation/"+allocID+"/stats", nil)
	stats.checkAgainst(t, statsRec, "alloc stats")
	assertSameShape(t, "alloc stats", firstObject(t, stats.body), statsRec.object(t))

	purgeRec := loadRecording(t, "rawexec-job-purge")
	purge := replay(t, url, purgeRec)
	purge.checkAgainst(t, purgeRec, "purge")
	assertSameShape(t, "purge", firstObject(t, purge.body), purgeRec.object(t))

	goneRec := loadRecording(t, "rawexec-job-after-purge")
	gone := do(t, "GET", url+"/v1/job/sandbox-rawexec", nil)
	gone.checkAgainst(t, goneRec, "job after purge")

	afterRec := loadRecording(t, "rawexec-allocation-after-purge")
	after := firstObject(t, do(t, "GET", url+"/v1/allocation/"+allocID, nil).body)
	// DeploymentStatus appears once a deployment marks the alloc healthy;
	// the simulator has no deployments.
	assertSameShape(t, "allocation after purge", after, afterRec.object(t), "DeploymentStatus")
	for _, k := range []string{"ClientStatus", "DesiredStatus", "DesiredDescription", "ClientDescription"} {
		if !jsonEqualValues(after[k], afterRec.object(t)[k]) {
			t.Errorf("allocation after purge %s = %v, recorded %v", k, after[k], afterRec.object(t)[k])
		}
	}
	if taskState(after)["State"] != "dead" || taskState(after)["FinishedAt"] == nil {
		t.Errorf("task state after purge %v", taskState(after))
	}
}

func taskState(alloc map[string]any) map[string]any {
	for _, v := range alloc["TaskStates"].(map[string]any) {
		return v.(map[string]any)
	}
	return nil
}

func TestJobsWithoutDatacentersAreStoredWithTheWildcard(t *testing.T) {
	t.Parallel()
	_, url, _ := newSim(t, recordingCluster)
	replay(t, url, loadRecording(t, "register-missing-datacenters"))
	rec := loadRecording(t, "register-missing-datacenters-job")
	got := replay(t, url, rec)
	got.checkAgainst(t, rec, "job")
	obj := firstObject(t, got.body)
	assertSameShape(t, "job", obj, rec.object(t))
	if !jsonEqualValues(obj["Datacenters"], []string{"*"}) {
		t.Errorf("Datacenters = %v, want [*]", obj["Datacenters"])
	}
	waitFor(t, "the job to run", func() bool {
		return firstObject(t, replay(t, url, rec).body)["Status"] == "running"
	})
}

func TestNonsenseDockerConfigIsAcceptedAndBlocked(t *testing.T) {
	t.Parallel()
	_, url, _ := newSim(t, recordingCluster)
	reg := replay(t, url, loadRecording(t, "register-bad-driver-config"))
	if reg.status != http.StatusOK {
		t.Fatalf("register: %d %s", reg.status, reg.body)
	}
	rec := loadRecording(t, "register-bad-driver-config-evaluations")
	evals := replay(t, url, rec)
	evals.checkAgainst(t, rec, "evaluations")
	assertEvalListShape(t, evals.body, rec.Body)
	if !strings.Contains(string(evals.body), `"missing drivers":1`) {
		t.Errorf("evaluations do not say missing drivers: %s", evals.body)
	}
}

func TestRegisterAPIResponsesAndIdenticalReRegisterIsANoOp(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	job := sandboxJob("sb-1", "worker-1")
	first := register(t, c, job)
	if first.EvalID == "" || first.JobModifyIndex == 0 || first.EvalCreateIndex == 0 {
		t.Fatalf("register response %+v", first)
	}
	alloc := runningAlloc(t, c, job)
	second := register(t, c, sandboxJob("sb-1", "worker-1"))
	if second.JobModifyIndex != first.JobModifyIndex || second.EvalID == first.EvalID {
		t.Errorf("re-register %+v after %+v: want same JobModifyIndex and a new eval", second, first)
	}
	stubs, _, _ := c.Jobs().Allocations("sb-1", true, nil)
	if len(stubs) != 1 || stubs[0].ID != alloc.ID {
		t.Errorf("identical re-register changed allocations: %v", stubs)
	}
	info, _, _ := c.Jobs().Info("sb-1", nil)
	if *info.Version != 0 || *info.Status != "running" {
		t.Errorf("job after no-op: version %d status %s", *info.Version, *info.Status)
	}
	// A changed job is a new version and replaces the allocation.
	changed := sandboxJob("sb-1", "worker-2")
	third := register(t, c, changed)
	if third.JobModifyIndex <= first.JobModifyIndex {
		t.Errorf("update kept JobModifyIndex %d", third.JobModifyIndex)
	}
	waitFor(t, "replacement on worker-2", func() bool {
		stubs, _, _ := c.Jobs().Allocations("sb-1", true, nil)
		live := 0
		for _, a := range stubs {
			if a.DesiredStatus == "run" && a.NodeName == "worker-2" && a.ClientStatus == "running" {
				live++
			}
		}
		return live == 1 && len(stubs) == 2
	})
	old, _, _ := c.Allocations().Info(alloc.ID, nil)
	if old.DesiredStatus != "stop" || old.ClientStatus != "complete" {
		t.Errorf("old alloc %s/%s", old.DesiredStatus, old.ClientStatus)
	}
	if got := s.Jobs(); len(got) != 1 || got[0] != "sb-1" {
		t.Errorf("Jobs() = %v", got)
	}
}

func TestStopWithoutPurgeKeepsTheJobDeadAndAllocationsReadable(t *testing.T) {
	t.Parallel()
	_, url, c := newSim(t)
	alloc := runningAlloc(t, c, sandboxJob("sb-stop", "worker-2"))
	evalID, _, err := c.Jobs().Deregister("sb-stop", false, nil)
	if err != nil || evalID == "" {
		t.Fatalf("deregister: %q %v", evalID, err)
	}
	job, _, err := c.Jobs().Info("sb-stop", nil)
	if err != nil || !*job.Stop || *job.Status != "dead" {
		t.Fatalf("job after stop: %+v %v", job, err)
	}
	a, _, err := c.Allocations().Info(alloc.ID, nil)
	if err != nil || a.DesiredStatus != "stop" || a.ClientStatus != "complete" {
		t.Fatalf("alloc after stop: %+v %v", a, err)
	}
	if r := do(t, "DELETE", url+"/v1/job/sb-stop?purge=true", nil); r.status != http.StatusOK {
		t.Errorf("purge: %d", r.status)
	}
	if _, _, err := c.Jobs().Info("sb-stop", nil); err == nil || !strings.Contains(err.Error(), "job not found") {
		t.Errorf("job after purge: %v", err)
	}
	if _, _, err := c.Allocations().Info(alloc.ID, nil); err != nil {
		t.Errorf("alloc after purge: %v", err)
	}
	list, _, _ := c.Jobs().PrefixList("sb-")
	if len(list) != 0 {
		t.Errorf("jobs after purge: %v", list)
	}
}

func TestEnforceIndexIsChecked(t *testing.T) {
	t.Parallel()
	_, _, c := newSim(t)
	job := sandboxJob("sb-cas", "worker-1")
	if _, _, err := c.Jobs().EnforceRegister(job, 7, nil); err == nil || !strings.Contains(err.Error(), "job does not exist") {
		t.Errorf("enforce on missing job: %v", err)
	}
	resp := register(t, c, sandboxJob("sb-cas", "worker-1"))
	_, _, err := c.Jobs().EnforceRegister(sandboxJob("sb-cas", "worker-2"), resp.JobModifyIndex+100, nil)
	if err == nil || !strings.Contains(err.Error(), "conflicting job modify index") {
		t.Errorf("stale enforce: %v", err)
	}
	if _, _, err := c.Jobs().EnforceRegister(sandboxJob("sb-cas", "worker-2"), resp.JobModifyIndex, nil); err != nil {
		t.Errorf("fresh enforce: %v", err)
	}
	_ = time.Second
}

func TestInvalidRegistrationsUseNomadsStatusesAndTexts(t *testing.T) {
	t.Parallel()
	_, url, _ := newSim(t)
	job := func(mutate func(j map[string]any)) map[string]any {
		j := map[string]any{
			"ID": "bad", "Name": "bad", "Type": "service", "Priority": 50, "Datacenters": []string{"dc1"},
			"TaskGroups": []any{map[string]any{"Name": "g", "Tasks": []any{map[string]any{"Name": "t", "Driver": "docker"}}}},
		}
		mutate(j)
		return map[string]any{"Job": j}
	}
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		text   string
	}{
		{"a missing job is a 400", "PUT", "/v1/jobs", map[string]any{}, 400, "Job must be specified"},
		{"a job without an ID is a 400", "PUT", "/v1/jobs", job(func(j map[string]any) { delete(j, "ID") }), 400, "Job ID hasn't been provided"},
		{"a path that names another job is a 400", "POST", "/v1/job/other", job(func(map[string]any) {}), 400, "Job ID does not match name"},
		{"two errors are listed", "PUT", "/v1/jobs", job(func(j map[string]any) { j["ID"] = "has space"; j["TaskGroups"] = nil }), 500,
			"2 errors occurred:\n\t* Job ID contains a space\n\t* Missing job task groups\n\n"},
		{"a bad priority", "PUT", "/v1/jobs", job(func(j map[string]any) { j["Priority"] = 101 }), 500,
			"1 error occurred:\n\t* Job priority must be between [1, 100]\n\n"},
		{"a bad type", "PUT", "/v1/jobs", job(func(j map[string]any) { j["Type"] = "daemon" }), 500,
			"1 error occurred:\n\t* Invalid job type: \"daemon\"\n\n"},
		{"a group without tasks", "PUT", "/v1/jobs", job(func(j map[string]any) { j["TaskGroups"] = []any{map[string]any{"Name": "g"}} }), 500,
			"1 error occurred:\n\t* Task group g validation failed: 1 error occurred:\n\t* Missing tasks for task group\n\n\n\n"},
		{"a constraint without operand", "PUT", "/v1/jobs", job(func(j map[string]any) {
			j["Constraints"] = []any{map[string]any{"LTarget": "${attr.cpu.arch}", "RTarget": "arm64"}}
		}), 500, "1 error occurred:\n\t* Constraint 1 validation failed: 1 error occurred:\n\t* Missing constraint operand\n\n\n\n"},
		{"a valid job registers through POST /v1/job/<id>", "POST", "/v1/job/bad", job(func(map[string]any) {}), 200, ""},
	}
	for _, tc := range cases {
		r := do(t, tc.method, url+tc.path, tc.body)
		if r.status != tc.status || (tc.text != "" && string(r.body) != tc.text) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.text)
		}
	}
	v := decode[map[string]any](t, do(t, "POST", url+"/v1/validate/job", job(func(map[string]any) {})).body)
	if v["Error"] != "" || v["ValidationErrors"] != nil || v["DriverConfigValidated"] != true {
		t.Errorf("validate of a valid job: %v", v)
	}
}
