package gateway

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"sandgate/gateway/wire"
)

// The request decoders parse untrusted bodies: they must never panic, and
// every refusal must be a 400 naming a field.
func fuzzDecoder(f *testing.F, newBody func() requestBody, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := newBody()
		err := decodeBody(bytes.NewReader(data), b)
		if err == nil {
			_ = b.policyBody() // must not panic on any decoded value
			return
		}
		var p *Problem
		if !errors.As(err, &p) || p.Status != http.StatusBadRequest || p.Field == "" || p.Code != wire.CodeInvalidRequest {
			t.Fatalf("decode %q: %#v is not a 400 naming a field", data, err)
		}
	})
}

func FuzzDecodeCreateRequest(f *testing.F) {
	fuzzDecoder(f, func() requestBody { return &createRequest{} },
		`{}`, ``, `{"profile":"strict","network":"none","ttl_seconds":600,"labels":{"a":"b"},"wait_seconds":0}`,
		`{"cpu_mhz":1.5}`, `{"labels":[]}`, `{"x":1}`, `{"ttl_seconds":"1h"}`, `[]`, `null`, `{"node":null}`, `{} {}`)
}

func FuzzDecodeExecRequest(f *testing.F) {
	fuzzDecoder(f, func() requestBody { return &execRequest{} },
		`{"argv":["echo","hi"]}`, `{"argv":"echo hi"}`, `{"argv":[1,2]}`, `{"argv":["cat"],"stdin":"abc","env":{"A":"b"},"workdir":"/w","timeout_seconds":5}`,
		`{"argv":["a\u0000b"]}`, `{"argv":[]}`, `{`, `{"argv":null}`, `{"env":{"A":1}}`)
}

func TestDecodeBodyNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, field string
	}{
		{"a string where an integer belongs", `{"ttl_seconds":"1h"}`, "ttl_seconds"},
		{"a fraction where an integer belongs", `{"cpu_mhz":1.5}`, "cpu_mhz"},
		{"an unknown field", `{"privileged":true}`, "privileged"},
		{"labels that are not an object", `{"labels":["a"]}`, "labels"},
		{"trailing data", `{} {}`, "body"},
		{"not JSON", `ttl=5`, "body"},
		{"truncated JSON", `{"ttl_seconds":`, "body"},
		{"an array instead of an object", `[]`, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := decodeBody(bytes.NewReader([]byte(c.body)), &createRequest{})
			var p *Problem
			if !errors.As(err, &p) || p.Field != c.field || p.Status != http.StatusBadRequest {
				t.Fatalf("got %#v, want a 400 naming %q", err, c.field)
			}
		})
	}
}

func FuzzDecodeMintRequest(f *testing.F) {
	fuzzDecoder(f, func() requestBody { return &mintRequest{} },
		`{"role":"agent","ttl_seconds":3600,"label":"x","subject":"a","quota":{"max_live_sandboxes":2}}`,
		`{"role":1}`, `{"quota":[]}`, `{"quota":{"x":1}}`, ``, `{"ttl_seconds":1e99}`)
}

func FuzzDecodeEnrollRequest(f *testing.F) {
	fuzzDecoder(f, func() requestBody { return &enrollRequest{} },
		`{"egress":true,"budget":{"max_sandboxes":4,"cpu_mhz":4000,"memory_mb":8192}}`,
		`{"egress":"yes"}`, `{"budget":{"gpus":1}}`, `{"budget":null}`, ``, `{"state":"frozen"}`)
}

func FuzzDecodeStateRequest(f *testing.F) {
	fuzzDecoder(f, func() requestBody { return &stateRequest{} }, `{"state":"frozen"}`, `{"state":3}`, `{}`)
}
