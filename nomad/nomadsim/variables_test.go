package nomadsim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestVariablesFollowTheRecordedCheckAndSet replays the recorded variable
// story: create, read, list, CAS update, stale CAS conflicts, delete.
func TestVariablesFollowTheRecordedCheckAndSet(t *testing.T) {
	t.Parallel()
	_, url, c := newSim(t)

	createRec := loadRecording(t, "var-create")
	created := replay(t, url, createRec)
	created.checkAgainst(t, createRec, "create")
	assertSameShape(t, "create", firstObject(t, created.body), createRec.object(t))
	v := decode[api.Variable](t, created.body)
	if v.Namespace != "default" || v.Items["user"] != "alice" || v.CreateIndex != v.ModifyIndex {
		t.Errorf("created %+v", v)
	}

	getRec := loadRecording(t, "var-get")
	got := replay(t, url, getRec)
	got.checkAgainst(t, getRec, "get")
	assertSameShape(t, "get", firstObject(t, got.body), getRec.object(t))

	listRec := loadRecording(t, "vars-list-prefix")
	list := replay(t, url, listRec)
	list.checkAgainst(t, listRec, "list")
	assertSameShape(t, "list", firstObject(t, list.body), listRec.object(t))

	// A CAS update with the current index succeeds.
	okRec := loadRecording(t, "var-update-cas-ok")
	ok := do(t, okRec.Request.Method, url+casPath(okRec.Request.Path, v.CreateIndex), okRec.Request.Body)
	ok.checkAgainst(t, okRec, "cas update")
	assertSameShape(t, "cas update", firstObject(t, ok.body), okRec.object(t))
	updated := decode[api.Variable](t, ok.body)
	if updated.ModifyIndex <= v.CreateIndex || updated.CreateIndex != v.CreateIndex || updated.Items["token"] != "rotated" {
		t.Fatalf("CAS update: %+v", updated)
	}
	// And through the api client.
	again, _, err := c.Variables().CheckedUpdate(&updated, nil)
	if err != nil || again.ModifyIndex <= updated.ModifyIndex {
		t.Fatalf("api CAS update: %+v %v", again, err)
	}

	for _, name := range []string{"var-update-cas-stale-conflict", "var-update-cas-stale-conflict-no-gzip", "var-create-cas0-exists-conflict", "var-delete-cas-stale-conflict"} {
		rec := loadRecording(t, name)
		var hdr []string
		if name == "var-update-cas-stale-conflict-no-gzip" {
			hdr = []string{"Accept-Encoding", "identity"}
		}
		r := do(t, rec.Request.Method, url+casPath(rec.Request.Path, v.CreateIndex), rec.Request.Body, hdr...)
		r.checkAgainst(t, rec, name)
		conflict := firstObject(t, r.body)
		assertSameShape(t, name, conflict, rec.object(t))
		if conflict["Items"].(map[string]any)["token"] != "rotated" || conflict["ModifyIndex"] == json.Number(strconv.FormatUint(v.CreateIndex, 10)) {
			t.Errorf("%s: conflict body is not the current variable: %s", name, r.body)
		}
	}
	var cas api.ErrCASConflict
	v.ModifyIndex = v.CreateIndex
	if _, _, err := c.Variables().CheckedUpdate(&v, nil); !errors.As(err, &cas) || cas.Conflict.Items["token"] != "rotated" {
		t.Errorf("api sees the stale CAS as %v", err)
	}

	delRec := loadRecording(t, "var-delete")
	del := replay(t, url, delRec)
	del.checkAgainst(t, delRec, "delete")
	if del.status != http.StatusNoContent || len(del.body) != 0 {
		t.Errorf("delete: %d %q", del.status, del.body)
	}
	goneRec := loadRecording(t, "var-get-after-delete")
	gone := replay(t, url, goneRec)
	gone.checkAgainst(t, goneRec, "get after delete")
	if string(gone.body) != goneRec.raw(t) {
		t.Errorf("get after delete: %q", gone.body)
	}
	if _, _, err := c.Variables().Read("sandbox/demo", nil); !errors.Is(err, api.ErrVariablePathNotFound) {
		t.Errorf("api read after delete: %v", err)
	}

	reservedRec := loadRecording(t, "var-create-reserved-path")
	reserved := replay(t, url, reservedRec)
	reserved.checkAgainst(t, reservedRec, "reserved path")
	if string(reserved.body) != reservedRec.raw(t) {
		t.Errorf("reserved path: %q", reserved.body)
	}
}

// casPath rewrites the recorded ?cas=36 (the create index of the recorded
// run) to ours.
func casPath(p string, createIndex uint64) string {
	return strings.Replace(p, "cas=36", "cas="+strconv.FormatUint(createIndex, 10), 1)
}
