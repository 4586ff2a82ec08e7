// caps.js: what this dashboard needs from the gateway (SPEC C1). An older
// gateway that lacks any of these gets "gateway upgrade required" and a
// dashboard with every control disabled.

export const NEEDED = Object.freeze(['sandboxes.v1', 'sandboxes.exec.v1', 'hosts.v1', 'tokens.v1', 'decisions.v1']);

// missingCapabilities lists the NEEDED capabilities an answer of
// GET /v1/capabilities lacks; a malformed answer lacks them all.
export function missingCapabilities(answer) {
  const list = answer && Array.isArray(answer.capabilities) ? answer.capabilities : [];
  const have = new Set(list.filter((c) => typeof c === 'string'));
  return NEEDED.filter((c) => !have.has(c));
}
