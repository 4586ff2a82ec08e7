package main

import (
	"time"

	"sandgate/gateway"
	"sandgate/policies"
	"sandgate/render"
)

// sandboxRequest is what a caller asks for; zero fields take the policy
// data's defaults.
type sandboxRequest = gateway.SpecRequest

// renderSandbox fills the spec of req with the bundle's defaults, renders
// it, and returns the spec and the job as the JSON that is submitted.
func renderSandbox(s policies.Settings, req sandboxRequest, now time.Time) (render.SandboxSpec, []byte, error) {
	spec, _, jobJSON, err := gateway.RenderJob(s, req, now)
	return spec, jobJSON, err
}
