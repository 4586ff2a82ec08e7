package policies

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// HostsInput is the input of data.sandgate.hosts.decision: one change an
// operator asks for on a host.
type HostsInput struct {
	Now int64 `json:"now"` // unix seconds
	// Action is enroll, unenroll or state.
	Action string `json:"action"`
	// Node is the node as the gateway sees it now (Nomad's view, the
	// operator's record, the control-plane verdict, usage when known).
	Node    NodeFacts    `json:"node"`
	Request HostsRequest `json:"request"`
	// LiveSandboxes counts the live sandboxes on the node.
	LiveSandboxes int64        `json:"live_sandboxes"`
	Effects       HostsEffects `json:"effects"`
}

// HostsRequest is what the operator asked for. Fields of other actions are
// left out of the document.
type HostsRequest struct {
	Egress  *bool            `json:"egress,omitempty"`  // enroll
	Budget  map[string]int64 `json:"budget,omitempty"`  // enroll: only the figures given
	State   string           `json:"state,omitempty"`   // state
	Reclaim *bool            `json:"reclaim,omitempty"` // unenroll
}

// HostsEffects are what the gateway will do if allowed.
type HostsEffects struct {
	// Reclaim: the node's live sandboxes will be destroyed first (R2).
	Reclaim bool `json:"reclaim"`
}

// Value builds the input document. Hosts changes are rare: a JSON round
// trip is clear and cheap enough.
func (in *HostsInput) Value() (ast.Value, error) { return jsonValue("hosts", in) }

// ReclaimInput is the input of data.sandgate.reclaim.decision: may the
// sandboxes live on this node stay there?
type ReclaimInput struct {
	Now  int64     `json:"now"` // unix seconds
	Node NodeFacts `json:"node"`
	// LiveSandboxes counts the live sandboxes on the node.
	LiveSandboxes int64 `json:"live_sandboxes"`
	// Trigger says who asks: monitor (the periodic usage pass) or drain (an
	// operator's change to draining).
	Trigger string `json:"trigger"`
	// Sandbox, when set, asks about one sandbox on the node: may it keep
	// what it wrote to its task directories (H5)?
	Sandbox *ReclaimSandbox `json:"sandbox,omitempty"`
}

// ReclaimSandbox is one sandbox's measured task-directory usage: what the
// usage monitor found in /alloc and /local by walking them from outside.
type ReclaimSandbox struct {
	ID string `json:"id"`
	// TaskDirBytes is the walk's total: apparent file sizes plus a floor
	// per entry (nomad.TaskDirUsage.Bytes).
	TaskDirBytes int64 `json:"task_dir_bytes"`
	// WalkComplete is false when the walk stopped at a bound or saw the
	// tree change: TaskDirBytes is then a lower bound.
	WalkComplete bool `json:"walk_complete"`
}

// Value builds the input document.
func (in *ReclaimInput) Value() (ast.Value, error) { return jsonValue("reclaim", in) }

func jsonValue(what string, v any) (ast.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("policies: %s input: %w", what, err)
	}
	return ParseInputBytes(b)
}
