// Package jobspec is the one place where policy data becomes a sandbox: a
// caller's Request, filled with the bundle's defaults (policies.Settings),
// is the sandbox spec (New); the spec rendered with the bundle's profiles
// and networks (RenderConfig) is the Nomad job and the JSON that is
// submitted (Render); and that JSON, with the node's facts, the budget,
// the principal and Nomad's own mounts (NomadMounts), is the document the
// admission policy judges (AdmissionInput).
//
// The gateway's create, the CLI's render and demo, and the escape audit
// all build their jobs and admission inputs here, so what is audited and
// replayed is what is submitted. WorkerFacts describes a healthy enrolled
// worker for when there is no Nomad to ask.
//
// jobspec imports no HTTP code and no store: only the standard library,
// policies, render and Nomad's api module. The node facts read from Nomad
// and the operator's record, and the budget limits clamped to a node's
// room, stay in the gateway, which reads them.
package jobspec
