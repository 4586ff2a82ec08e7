// Package apidoc holds sandgate's OpenAPI 3.1 document (openapi.yaml),
// served as GET /openapi.json. The gateway's tests validate its real
// answers against it, route by route, and fail on a route it lacks.
package apidoc

import (
	"context"
	_ "embed" // for go:embed
	"encoding/json"
	"fmt"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed openapi.yaml
var source []byte

var (
	once    sync.Once
	doc     *openapi3.T
	docJSON []byte
	docErr  error
)

func load() {
	l := openapi3.NewLoader()
	d, err := l.LoadFromData(source)
	if err != nil {
		docErr = fmt.Errorf("apidoc: load openapi.yaml: %w", err)
		return
	}
	if err := d.Validate(context.Background()); err != nil {
		docErr = fmt.Errorf("apidoc: openapi.yaml is not a valid OpenAPI document: %w", err)
		return
	}
	b, err := json.Marshal(d)
	if err != nil {
		docErr = fmt.Errorf("apidoc: encode: %w", err)
		return
	}
	doc, docJSON = d, b
}

// Doc returns the parsed, validated document (shared: do not modify it).
func Doc() (*openapi3.T, error) {
	once.Do(load)
	return doc, docErr
}

// JSON returns the document as JSON.
func JSON() ([]byte, error) {
	once.Do(load)
	return docJSON, docErr
}
