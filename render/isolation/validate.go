package isolation

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Every value is validated before it reaches the script: a value that
// passes is made only of characters that need no shell quoting (the
// template single-quotes them all the same).
var (
	ifNameRe    = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,14}$`)
	nodeNameRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$`)
	metaKeyRe   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	metaValueRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	pathRe      = regexp.MustCompile(`^/[A-Za-z0-9/._+@:-]*$`)
	chainRe     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,27}$`)
	tagRe       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	versionRe   = regexp.MustCompile(`^v[0-9]{1,6}$`)
)

// specialRanges are the IANA special-purpose IPv4 ranges a resolver may not
// be in (besides every dropped range and overlay): a sandbox's resolver is
// a public address.
var specialRanges = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
}

// builtinChains are chains the script must never own.
var builtinChains = []string{"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"}

// checked is a Config whose values parsed.
type checked struct {
	subnet    netip.Prefix
	overlays  []netip.Prefix
	drops     []netip.Prefix
	resolvers []netip.Addr
}

// validate reports every invalid value of c, each as a *FlagError, joined.
func (c Config) validate() error {
	_, err := c.check()
	return err
}

// check validates c and returns its parsed values.
func (c Config) check() (checked, error) {
	var (
		k    checked
		errs []error
	)
	bad := func(e *FlagError) { errs = append(errs, e) }

	if !ifNameRe.MatchString(c.Bridge) || c.Bridge == "." || c.Bridge == ".." {
		bad(flagErr("--bridge", c.Bridge, "not a Linux interface name (1 to 15 characters of a-z A-Z 0-9 _ . -, not starting with -)"))
	}
	var err error
	if k.subnet, err = networkPrefix(c.Subnet); err != nil {
		bad(flagErr("--subnet", c.Subnet, "%v", err))
	} else if b := k.subnet.Bits(); b < 16 || b > 29 {
		bad(flagErr("--subnet", c.Subnet, "prefix length %d; want 16 to 29", b))
	}
	k.overlays = prefixList("--overlay", c.Overlays, bad)
	for _, o := range k.overlays {
		if k.subnet.IsValid() && o.Overlaps(k.subnet) {
			bad(flagErr("--overlay", o.String(), "overlaps --subnet %s", k.subnet))
		}
	}
	k.drops = prefixList("DropCIDRs", c.DropCIDRs, bad)
	if len(c.DropCIDRs) == 0 {
		bad(flagErr("DropCIDRs", "", "empty: the sandbox would reach private and metadata addresses"))
	}
	portList("--nomad-ports", c.NomadPorts, 3, bad)
	portList("--ssh-ports", c.SSHPorts, 1, bad)
	for _, p := range c.SSHPorts {
		for _, n := range c.NomadPorts {
			if p == n {
				bad(flagErr("--ssh-ports", strconv.Itoa(p), "is also one of --nomad-ports"))
			}
		}
	}
	k.resolvers = c.checkResolvers(k, bad)
	seen := map[string]bool{}
	for _, n := range c.ControlPlaneNames {
		switch {
		case !nodeNameRe.MatchString(n):
			bad(flagErr("--control-plane-name", n, "not a node name (a-z A-Z 0-9 _ . -, not starting with - or .)"))
		case seen[n]:
			bad(flagErr("--control-plane-name", n, "given twice"))
		}
		seen[n] = true
	}
	for key, values := range c.ControlPlaneMeta {
		if !metaKeyRe.MatchString(key) {
			bad(flagErr("ControlPlaneMeta", key, "not a node meta key (a-z A-Z 0-9 _ . -)"))
		}
		if len(values) == 0 {
			bad(flagErr("ControlPlaneMeta", key, "no value marks a control plane"))
		}
		for _, v := range values {
			if !metaValueRe.MatchString(v) {
				bad(flagErr("ControlPlaneMeta", key+"="+v, "not a node meta value (a-z A-Z 0-9 _ . : -)"))
			}
		}
	}
	if !pathRe.MatchString(c.NomadConfigDir) || filepath.Clean(c.NomadConfigDir) != c.NomadConfigDir {
		bad(flagErr("--nomad-config-dir", c.NomadConfigDir, "not a clean absolute path (a-z A-Z 0-9 / . _ + @ : -)"))
	}
	if !chainRe.MatchString(c.Chain) || isReservedChain(c.Chain) {
		bad(flagErr("Chain", c.Chain, "not a chain this script may own (1 to 28 of A-Z a-z 0-9 _ -; not built in, not DOCKER*)"))
	}
	if !tagRe.MatchString(c.CommentTag) {
		bad(flagErr("CommentTag", c.CommentTag, "not a comment tag (1 to 64 of a-z 0-9 -)"))
	}
	if !versionRe.MatchString(c.Version) {
		bad(flagErr("Version", c.Version, "not a version like v1"))
	}
	return k, errors.Join(errs...)
}

// checkResolvers parses the resolvers: public IPv4 addresses, none inside a
// dropped range, an overlay or a special-purpose range, none twice.
func (c Config) checkResolvers(k checked, bad func(*FlagError)) []netip.Addr {
	if len(c.Resolvers) == 0 {
		bad(flagErr("--resolver", "", "at least one public resolver is needed"))
	}
	var forbidden []netip.Prefix
	forbidden = append(forbidden, k.drops...)
	forbidden = append(forbidden, k.overlays...)
	if k.subnet.IsValid() {
		forbidden = append(forbidden, k.subnet)
	}
	for _, s := range specialRanges {
		if p, err := netip.ParsePrefix(s); err == nil {
			forbidden = append(forbidden, p)
		}
	}
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, s := range c.Resolvers {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || a.String() != s {
			bad(flagErr("--resolver", s, "not an IPv4 address (e.g. 1.1.1.1)"))
			continue
		}
		if seen[a] {
			bad(flagErr("--resolver", s, "given twice"))
			continue
		}
		seen[a] = true
		if p, ok := containing(forbidden, a); ok {
			bad(flagErr("--resolver", s, "inside %s: a sandbox resolver must be a public address", p))
			continue
		}
		out = append(out, a)
	}
	return out
}

// networkPrefix parses s as a canonical IPv4 network prefix.
func networkPrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("not a CIDR (want e.g. %s)", DefaultSubnet)
	case !p.Addr().Is4():
		return netip.Prefix{}, errors.New("not IPv4: sandboxes have no IPv6 (the network has IPv6 off)")
	case p.Masked() != p:
		return netip.Prefix{}, fmt.Errorf("not a network address (did you mean %s?)", p.Masked())
	}
	return p, nil
}

// prefixList parses a list of prefixes, refusing duplicates and overlaps
// among them.
func prefixList(flag string, list []string, bad func(*FlagError)) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		p, err := networkPrefix(s)
		if err != nil {
			bad(flagErr(flag, s, "%v", err))
			continue
		}
		clash := false
		for _, q := range out {
			if q == p {
				bad(flagErr(flag, s, "given twice"))
				clash = true
			} else if q.Overlaps(p) {
				bad(flagErr(flag, s, "overlaps %s", q))
				clash = true
			}
		}
		if !clash {
			out = append(out, p)
		}
	}
	return out
}

// portList checks a port list: at least min ports, each 1-65535, none twice.
func portList(flag string, ports []int, minCount int, bad func(*FlagError)) {
	if len(ports) < minCount {
		what := "at least one port"
		if minCount == 3 {
			what = "Nomad's HTTP, RPC and Serf ports, in that order"
		}
		bad(flagErr(flag, joinInts(ports, ","), "want %s", what))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		switch {
		case p < 1 || p > 65535:
			bad(flagErr(flag, strconv.Itoa(p), "port out of range 1-65535"))
		case seen[p]:
			bad(flagErr(flag, strconv.Itoa(p), "given twice"))
		}
		seen[p] = true
	}
}

// containing returns the first prefix of list that contains a.
func containing(list []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, p := range list {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func isReservedChain(name string) bool {
	for _, b := range builtinChains {
		if strings.EqualFold(name, b) {
			return true
		}
	}
	return strings.HasPrefix(strings.ToUpper(name), "DOCKER")
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}
