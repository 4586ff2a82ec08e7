package nomadsim

import (
	"path"
	"regexp"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// constraintString is how Nomad words a constraint in ConstraintFiltered.
func constraintString(c *api.Constraint) string {
	return c.LTarget + " " + c.Operand + " " + c.RTarget
}

// resolveTarget resolves a constraint target against a node like Nomad's
// feasibility checker: ${attr.X}, ${meta.X}, ${node.unique.name} (the node
// Name), ${node.unique.id}, ${node.datacenter}, ${node.class},
// ${node.pool}; anything without ${ is a literal. The bool is false when the
// target is unknown or the node lacks it.
func resolveTarget(target string, n *api.Node) (string, bool) {
	if !strings.HasPrefix(target, "${") {
		return target, true
	}
	if !strings.HasSuffix(target, "}") {
		return "", false
	}
	inner := target[2 : len(target)-1]
	switch inner {
	case "node.unique.name":
		return n.Name, true
	case "node.unique.id":
		return n.ID, true
	case "node.datacenter":
		return n.Datacenter, true
	case "node.class":
		return n.NodeClass, true
	case "node.pool":
		return n.NodePool, true
	}
	if k, ok := strings.CutPrefix(inner, "attr."); ok {
		v, found := n.Attributes[k]
		return v, found
	}
	if k, ok := strings.CutPrefix(inner, "meta."); ok {
		v, found := n.Meta[k]
		return v, found
	}
	return "", false
}

// constraintMatches reports whether node n satisfies c. Supported operands:
// "=", "==", "is", "!=", "not", "regexp", "set_contains",
// "set_contains_any", "is_set", "is_not_set". Any other operand (version,
// semver, distinct_hosts, lexical comparisons, ...) fails the constraint.
func constraintMatches(c *api.Constraint, n *api.Node) bool {
	l, lok := resolveTarget(c.LTarget, n)
	r, rok := resolveTarget(c.RTarget, n)
	switch c.Operand {
	case "=", "==", "is":
		return lok && rok && l == r
	case "!=", "not":
		return lok != rok || l != r
	case "is_set":
		return lok
	case "is_not_set":
		return !lok
	case api.ConstraintRegex:
		if !lok || !rok {
			return false
		}
		re, err := regexp.Compile(r)
		return err == nil && re.MatchString(l)
	case api.ConstraintSetContains, "set_contains_all":
		return lok && rok && setContains(l, r, true)
	case "set_contains_any":
		return lok && rok && setContains(l, r, false)
	}
	return false
}

func setContains(have, want string, all bool) bool {
	set := map[string]bool{}
	for _, v := range strings.Split(have, ",") {
		set[strings.TrimSpace(v)] = true
	}
	for _, v := range strings.Split(want, ",") {
		in := set[strings.TrimSpace(v)]
		if all && !in {
			return false
		}
		if !all && in {
			return true
		}
	}
	return all
}

// datacenterMatches reports whether dc matches one of the job's datacenter
// patterns ("*" globs allowed, as Nomad 1.6 allows).
func datacenterMatches(patterns []string, dc string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, dc); err == nil && ok {
			return true
		}
	}
	return false
}
