package wire

import "slices"

// Capabilities is GET /v1/capabilities (C1): what the gateway serves. Its
// members stand in the order the gateway has always written them (by
// name).
type Capabilities struct {
	// BundleRevision is the serving bundle's revision.
	BundleRevision string `json:"bundle_revision"`
	// Capabilities are the route families the bundle serves and the
	// gateway's own (problem+json, metrics, dashboard.v1, mcp.v1).
	Capabilities []string `json:"capabilities"`
	// Choices are the values a create may name in the serving bundle:
	// "profiles", "networks" and "images"; empty from a gateway that
	// predates them.
	Choices map[string][]string `json:"choices"`
	// Simulated: the gateway runs on the Nomad simulator (sandgate dev).
	Simulated bool   `json:"simulated"`
	Version   string `json:"version"`
}

// Has reports whether the gateway advertises the capability name.
func (c Capabilities) Has(name string) bool {
	return slices.Contains(c.Capabilities, name)
}
