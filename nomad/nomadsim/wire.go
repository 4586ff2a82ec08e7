package nomadsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// This file holds the wire encoding. Values are built as nomad/api types and
// then turned into generic JSON maps, which (a) sorts keys alphabetically as
// Nomad's server encoder does and (b) lets us fix the few places where the
// 2026 api types and a v1.6.5 server disagree: fields the server does not
// have, fields the api lacks, and fields the server omits when empty. Every
// adjustment below is backed by a fixture in testdata/recordings.

// metaKind selects the X-Nomad-* headers of a response, as the agent sends
// them: reads carry all three, writes only the index, agent and client
// (node-local) endpoints none.
type metaKind int

const (
	metaNone metaKind = iota
	metaRead
	metaWrite
)

func setMeta(w http.ResponseWriter, kind metaKind, index uint64) {
	switch kind {
	case metaRead:
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
		w.Header().Set("X-Nomad-KnownLeader", "true")
		w.Header().Set("X-Nomad-LastContact", "0")
	case metaWrite:
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	}
}

// writeJSON writes v as the JSON body of a 200 (or status) response.
func writeJSON(w http.ResponseWriter, status int, kind metaKind, index uint64, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(err.Error()))
		return
	}
	setMeta(w, kind, index)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError writes a plain-text error body like the agent does. The agent
// gzips responses for clients that accept it, and then its error bodies carry
// no Content-Type at all; without gzip Go sniffs text/plain. We do not gzip,
// so we reproduce what the client observes in both cases.
func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h := w.Header()
	if _, set := h["Content-Type"]; !set {
		if r != nil && acceptsGzip(r) {
			h["Content-Type"] = nil // suppress net/http's sniffing
		} else {
			h.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg)) //nolint:gosec // G705: a test double's plain-text error, byte for byte what the agent sends
}

// writeErrorMeta is writeError with X-Nomad-* headers, as read endpoints send
// even on a 404.
func writeErrorMeta(w http.ResponseWriter, r *http.Request, kind metaKind, index uint64, status int, msg string) {
	setMeta(w, kind, index)
	writeError(w, r, status, msg)
}

// writeConflict writes a 409 whose body is JSON but, like the agent's under
// gzip, carries no Content-Type (text/plain without gzip).
func writeConflict(w http.ResponseWriter, r *http.Request, index uint64, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	setMeta(w, metaWrite, index)
	writeError(w, r, http.StatusConflict, string(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		if strings.Contains(v, "gzip") {
			return true
		}
	}
	return false
}

// obj is a JSON object being reshaped.
type obj = map[string]any

// toWire converts v to generic JSON (numbers kept exact).
func toWire(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil
	}
	return out
}

func toObj(v any) obj {
	o, _ := toWire(v).(obj)
	if o == nil {
		o = obj{}
	}
	return o
}

// zeroTime is how encoding/json writes a zero time.Time; the server writes
// such fields as null or drops them.
const zeroTime = "0001-01-01T00:00:00Z"

// isEmptyJSON reports whether a generic JSON value is what the server's
// encoder drops with omitempty: null, false, 0, "", a zero time, [] or {}.
func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case string:
		return t == "" || t == zeroTime
	case json.Number:
		f, err := t.Float64()
		return err == nil && f == 0
	case []any:
		return len(t) == 0
	case obj:
		return len(t) == 0
	}
	return false
}

// isNullStruct reports whether v is an object whose members are all null,
// like an unset DesiredTransition.
func isNullStruct(v any) bool {
	o, ok := v.(obj)
	if !ok {
		return v == nil
	}
	for _, m := range o {
		if m != nil {
			return false
		}
	}
	return true
}

func dropKeys(o obj, keys ...string) {
	for _, k := range keys {
		delete(o, k)
	}
}

func dropEmpty(o obj, keys ...string) {
	for _, k := range keys {
		if v, ok := o[k]; ok && isEmptyJSON(v) {
			delete(o, k)
		}
	}
}

// decodeBody decodes the JSON request body into v. On failure it answers 400
// with encoding/json's message, as the agent does, and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, r, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// writeResponse reshapes a nomad/api write response (JobRegisterResponse and
// friends): the server sends QueryMeta-ish fields and Index, never the
// client-side LastIndex/RequestTime.
func writeResponse(v any, index uint64) obj {
	o := toObj(v)
	dropKeys(o, "LastIndex", "RequestTime")
	o["Index"] = index
	o["KnownLeader"] = false
	o["LastContact"] = 0
	o["NextToken"] = ""
	return o
}

// The write responses without QueryMeta fields (node drain/eligibility).
func nodeWriteResponse(v any, index uint64) obj {
	o := toObj(v)
	dropKeys(o, "LastIndex", "RequestTime")
	o["Index"] = index
	return o
}
