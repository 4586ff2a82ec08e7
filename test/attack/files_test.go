package attack

import (
	"context"
	"net/http"
	"testing"

	"sandgate/gateway/apitest"
)

// Files: every way of naming a path outside the roots, or a root itself,
// is refused by F1 before Nomad hears of it; bits beyond 0777 by F2; a
// symbolic link out of the roots, made inside the sandbox, by the script
// in the sandbox, with the container's /etc unchanged.

const filesA1 = "/v1/sandboxes/{a1}/files?path="

func fileReq(method, query, body string) apitest.Request {
	return apitest.Request{Method: method, Path: filesA1 + query, Body: body, Header: map[string]string{"Content-Type": "application/octet-stream"}}
}

// etcUnchanged checks that the simulated container of a1 still holds its
// own /etc/passwd.
func etcUnchanged(t *testing.T, w *world, _ apitest.Reply) {
	rec, err := w.st.Get(context.Background(), w.ids["a1"])
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := w.sim.ReadContainerFile(rec.AllocID, "/etc/passwd"); !ok || string(b) != "root:x:0:0:root:/root:/bin/sh\n" {
		t.Errorf("the container's /etc/passwd changed: %q %v", b, ok)
	}
	if _, ok := w.sim.ReadContainerFile(rec.AllocID, "/etc/planted"); ok {
		t.Error("a file was planted in the container's /etc")
	}
}

func filesCases(*testing.T, *world) []attack {
	f1 := func(name string, rq apitest.Request) attack {
		return attack{name: name, req: rq, as: "sess:a1", status: 403, code: "policy_denied", rules: []string{"F1"}}
	}
	f2 := func(name string, rq apitest.Request) attack {
		return attack{name: name, req: rq, as: "sess:a1", status: 403, code: "policy_denied", rules: []string{"F2"}}
	}
	bad := func(name string, rq apitest.Request, field string) attack {
		return attack{name: name, req: rq, as: "sess:a1", status: 400, code: "invalid_request", check: field400(field)}
	}
	escape := func(name string, rq apitest.Request) attack {
		return attack{name: name, req: rq, as: "sess:a1", status: 403, code: "path_escapes_roots", nomad: true, check: etcUnchanged}
	}
	get := http.MethodGet
	return []attack{
		f1("a path outside the roots", fileReq(get, "/etc/passwd", "")),
		f1("dot-dot out of a root", fileReq(get, "/workspace/../etc/passwd", "")),
		f1("percent-encoded dot-dot", fileReq(get, "/workspace/%2e%2e/etc/passwd", "")),
		f1("dot-dot that would stay inside a root", fileReq(get, "/workspace/a/../b", "")),
		f1("a doubled slash before /etc", fileReq(get, "//etc/passwd", "")),
		f1("a relative path", fileReq(get, "workspace/x", "")),
		f1("an empty path", fileReq(get, "", "")),
		f1("no path at all", apitest.Request{Method: get, Path: "/v1/sandboxes/{a1}/files"}),
		f1("a NUL byte in the path", fileReq(get, "/workspace/x%00/../../etc/passwd", "")),
		f1("a NUL byte alone", fileReq(http.MethodPut, "/workspace/x%00", "x")),
		f1("a sibling whose name starts like a root", fileReq(get, "/workspacefoo/x", "")),
		f1("another case of a root", fileReq(get, "/WORKSPACE/x", "")),
		f1("a backslash path that is no segment of a root", fileReq(get, "/workspace%5c..%5cetc", "")),
		f1("the process's environment", fileReq(get, "/proc/self/environ", "")),
		f1("Nomad's secrets directory", fileReq(get, "/secrets/nomad_token", "")),
		f1("replacing a root", fileReq(http.MethodPut, "/workspace", "x")),
		f1("removing a root", fileReq(http.MethodDelete, "/tmp/", "")),
		f1("removing a root with dot segments", fileReq(http.MethodDelete, "/tmp/./", "")),
		f1("a path of 5 KiB", fileReq(get, "/workspace/"+repeatPath(5<<10), "")),
		f2("a setuid file", fileReq(http.MethodPut, "/workspace/x&mode=4755", "x")),
		f2("a setgid file", fileReq(http.MethodPut, "/workspace/x&mode=2755", "x")),
		f2("a sticky file", fileReq(http.MethodPut, "/workspace/x&mode=1777", "x")),
		f2("mode bits beyond any", fileReq(http.MethodPut, "/workspace/x&mode=77777", "x")),
		f2("an empty read window", fileReq(get, "/workspace/x&length=0", "")),
		f2("a read window over files.max_read_bytes", fileReq(get, "/workspace/x&length=67108865", "")),
		f2("a negative read offset", fileReq(get, "/workspace/x&offset=-1", "")),
		bad("a read length in units", fileReq(get, "/workspace/x&length=1MiB", ""), "length"),
		bad("an offset on a write", fileReq(http.MethodPut, "/workspace/x&offset=10", "x"), "offset"),
		bad("a mode in hex", fileReq(http.MethodPut, "/workspace/x&mode=0x1ff", "x"), "mode"),
		bad("a mode as rwx", fileReq(http.MethodPut, "/workspace/x&mode=rwxr-xr-x", "x"), "mode"),
		bad("a mode on a read", fileReq(get, "/workspace/x&mode=0644", ""), "mode"),
		bad("recursive on a write", fileReq(http.MethodPut, "/workspace/x&recursive=true", "x"), "recursive"),
		bad("recursive as yes", fileReq(http.MethodDelete, "/workspace/x&recursive=yes", ""), "recursive"),
		{name: "a session token on another sandbox's files", req: apitest.Request{Method: get, Path: "/v1/sandboxes/{b1}/files?path=/workspace"}, as: "sess:a1",
			status: 403, code: "policy_denied", rules: []string{"T2"}},
		{name: "a second path parameter is the one ignored by both", req: fileReq(get, "/workspace/none&path=/etc/passwd", ""), as: "sess:a1",
			status: 404, code: "file_not_found", nomad: true},
		{name: "a link to /etc made inside the sandbox", req: post(execA1, execBody(map[string]any{"argv": []string{"ln", "-s", "/etc", "/workspace/etc"}})), as: "sess:a1",
			status: 200, nomad: true, check: ran(0, "")},
		{name: "a link to a file of /etc made inside the sandbox", req: post(execA1, execBody(map[string]any{"argv": []string{"ln", "-s", "/etc/passwd", "/tmp/pw"}})), as: "sess:a1",
			status: 200, nomad: true, check: ran(0, "")},
		escape("reading through a link to /etc", fileReq(get, "/workspace/etc/passwd", "")),
		escape("reading a link to /etc/passwd", fileReq(get, "/tmp/pw", "")),
		escape("listing through a link to /etc", fileReq(get, "/workspace/etc", "")),
		escape("planting through a link to /etc", fileReq(http.MethodPut, "/workspace/etc/planted", "x")),
		escape("overwriting through a link to /etc/passwd", fileReq(http.MethodPut, "/tmp/pw", "root::0:0::/:/bin/sh\n")),
		escape("making directories through a link to /etc", fileReq(http.MethodPut, "/workspace/etc/new/dir/x", "x")),
		escape("deleting through a link to /etc", fileReq(http.MethodDelete, "/workspace/etc/passwd", "")),
		{name: "deleting the link itself keeps its target", req: fileReq(http.MethodDelete, "/tmp/pw", ""), as: "sess:a1", status: 204, nomad: true, check: etcUnchanged},
	}
}

func repeatPath(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
