// Package docs holds the documentation the gateway serves itself:
// llms.txt, the guide for agents, at GET /llms.txt. The other files here
// are read on GitHub and in a clone.
package docs

import _ "embed" // for go:embed

// LLMsTxt is docs/llms.txt, served at GET /llms.txt.
//
//go:embed llms.txt
var LLMsTxt []byte
