package policies

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// forbiddenBuiltins reach outside the decision: the network, DNS, the
// gateway process's environment and configuration. A policy decides on its
// input and its data only, so a bundle that calls one does not compile:
// neither a reviewer's bundle nor a candidate uploaded for a replay can
// make the gateway send a request, resolve a name, or read its secrets
// (opa.runtime returns the process environment).
var forbiddenBuiltins = map[string]bool{
	"http.send":          true,
	"net.lookup_ip_addr": true,
	"opa.runtime":        true,
}

// capabilities are OPA's built-ins for this version without
// forbiddenBuiltins; every bundle is compiled, and tested, with them.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if !forbiddenBuiltins[b.Name] {
			kept = append(kept, b)
		}
	}
	c.Builtins = kept
	c.AllowNet = []string{}
	return c
})
