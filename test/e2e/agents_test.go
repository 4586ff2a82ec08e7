package e2e

import "sandgate/nomad/localnomad"

// agent is one Nomad agent process of the suite: the server-only agent or a
// client-only agent with the docker driver, as `sandgate dev --nomad-agent`
// runs them too (package localnomad).
type agent = localnomad.Agent
