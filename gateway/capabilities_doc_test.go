package gateway

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Every capability the bundle's data advertises, and every one the gateway
// adds of its own, is documented in docs/api.md's list (issue 21: mcp.v1
// was missing): an agent author reads what each one means there.
func TestEveryCapabilityIsDocumented(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../policies/data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Sandgate struct {
			Config struct {
				Capabilities []string `json:"capabilities"`
			} `json:"config"`
		} `json:"sandgate"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	caps := append(data.Sandgate.Config.Capabilities, gatewayCapabilities...)
	if len(data.Sandgate.Config.Capabilities) < 5 {
		t.Fatalf("policies/data.json advertises only %v", data.Sandgate.Config.Capabilities)
	}
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(doc), "`capabilities` are the route families")
	if !ok {
		t.Fatal("docs/api.md has no capabilities paragraph")
	}
	list, _, _ = strings.Cut(list, "\n## ")
	for _, c := range caps {
		if !strings.Contains(list, "`"+c+"`") {
			t.Errorf("capability %s is advertised but not in docs/api.md's capabilities list", c)
		}
	}
}
