// Package datapatch applies RFC 7386 JSON merge patches to policy data: how
// the end-to-end suite (test/testdata/e2e-policy-data-patch.json) and
// `sandgate dev --nomad-agent` fit the bundle's data.json to local images
// and architectures without touching its Rego. It imports only the
// standard library.
package datapatch

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Merge applies the merge patch to target and returns the result; target
// is not modified. A null member of the patch removes that member; an
// object merges member by member; anything else replaces.
func Merge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, _ := target.(map[string]any)
	out := maps.Clone(t)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = Merge(out[k], v)
	}
	return out
}

// Apply is Merge on JSON documents; the result is indented JSON.
func Apply(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("datapatch: the document: %w", err)
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("datapatch: the patch: %w", err)
	}
	return json.MarshalIndent(Merge(d, p), "", " ")
}
