package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"sandgate/gateway/apidoc"
)

// GET /openapi.json as the gateway serves it, in process: the document is
// built once per bundle generation, so a request costs the copy of its
// bytes.
//
//	go test -run '^$' -bench 'OpenAPI' -benchmem ./gateway/
func BenchmarkOpenAPIServed(b *testing.B) {
	h := newHarness(b, harnessOptions{})
	handler := h.srv.Handler()
	req := httptest.NewRequest(http.MethodGet, "/openapi.json", nil)
	handler.ServeHTTP(httptest.NewRecorder(), req) // the generation's one build
	for b.Loop() {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d", w.Code)
		}
	}
}

// What a request would cost if the document were built for it: the build
// the cache saves every request but the first of a bundle generation.
func BenchmarkOpenAPIBuildPerRequest(b *testing.B) {
	h := newHarness(b, harnessOptions{})
	f := h.srv.OpenAPIFacts()
	for b.Loop() {
		d, err := apidoc.Build(context.Background(), f)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(d); err != nil {
			b.Fatal(err)
		}
	}
}
