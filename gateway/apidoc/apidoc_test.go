package apidoc

import (
	"encoding/json"
	"testing"
)

func TestTheDocumentIsAValidOpenAPI31Document(t *testing.T) {
	d, err := Doc()
	if err != nil {
		t.Fatal(err)
	}
	if !d.IsOpenAPI31OrLater() || d.Paths.Len() < 20 {
		t.Fatalf("openapi %q with %d paths", d.OpenAPI, d.Paths.Len())
	}
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["openapi"] != "3.1.0" {
		t.Fatalf("JSON: %v %v", m["openapi"], err)
	}
}
