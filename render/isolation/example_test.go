package isolation_test

import (
	"fmt"
	"strings"

	"sandgate/render/isolation"
)

// Render builds the plan the isolation policy decides on and the script
// that carries it out.
func ExampleRender() {
	cfg := isolation.DefaultConfig()
	cfg.Overlays = []string{"10.8.0.0/24"}
	plan, script, err := isolation.Render(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(plan.Network.Name, plan.Network.Subnet, plan.Chain, len(plan.Rules), "rules")
	jump, _ := plan.Rule("jump-docker-user")
	fmt.Println(strings.Join(jump.Args(), " "))
	fmt.Println(strings.Count(string(script), "\n\tensure_rule "))
	// Output:
	// sandgate-egress 172.31.250.0/24 SANDGATE-ISOLATION 20 rules
	// -i sandgate-egress -m comment --comment sandgate-isolation jump from sandgate-egress -j SANDGATE-ISOLATION
	// 20
}

// A refused value names its flag.
func ExampleNew_invalid() {
	cfg := isolation.DefaultConfig()
	cfg.Resolvers = []string{"10.0.0.2"}
	_, err := isolation.New(cfg)
	fmt.Println(err)
	// Output:
	// isolation: invalid config: --resolver "10.0.0.2": inside 10.0.0.0/8: a sandbox resolver must be a public address
}
