// Package egress is the one way a runner's jobs reach the network: the
// dialer of the http node kind and of run-completion webhooks. A run spec
// names URLs, and whoever may submit a run would otherwise make the runner
// call its own admin server, the cloud's metadata service (169.254.169.254)
// or anything else on the private network behind it. So by default the
// dialer refuses loopback, link-local, private, unique-local, shared
// (100.64.0.0/10), multicast and unspecified addresses, and the operator
// opts addresses or host names back in with an allow-list (EGRESS_ALLOW).
//
// The check runs in the dialer's Control hook, on the address actually
// being connected, after name resolution: a name that resolves to a
// refused address is refused, a name whose answer changes between a
// check and the connect (DNS rebinding) cannot slip past it, and every
// redirect hop dials through the same hook.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is an outbound connection to an address the policy refuses.
var ErrRefused = errors.New("egress: address refused")

// Setting is the runner's environment variable of the allow-list, named in
// errors so an operator knows what to change.
const Setting = "EGRESS_ALLOW"

// refused are the ranges a job may not reach unless allowed, beside what
// netip's predicates name (loopback, private, link-local, multicast,
// unspecified).
var refused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier NAT, some metadata services)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64: an IPv4 address in disguise
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2002::/16"),      // 6to4: an IPv4 address in disguise
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated, still routed on some networks)
}

// Policy says which addresses jobs may reach. The zero value (and nil)
// refuses every private address and allows every public one.
type Policy struct {
	prefixes []netip.Prefix
	hosts    []string // lower case; "*.example.com" allows its subdomains
}

// Parse reads an allow-list: entries separated by commas or white space,
// each a CIDR ("10.0.0.0/8"), an IP address ("127.0.0.1", "::1"), a host
// name ("hooks.internal") or a host name's subdomains ("*.svc.cluster.local").
// An entry that is none of these is an error naming setting and the entry.
func Parse(setting, s string) (*Policy, error) {
	p := &Policy{}
	var errs []error
	for _, e := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if pre, err := netip.ParsePrefix(e); err == nil {
			p.prefixes = append(p.prefixes, pre.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		h := strings.ToLower(strings.TrimSuffix(e, "."))
		if validHost(strings.TrimPrefix(h, "*.")) && !strings.Contains(strings.TrimPrefix(h, "*."), "*") {
			p.hosts = append(p.hosts, h)
			continue
		}
		errs = append(errs, fmt.Errorf("%s %q: not a CIDR (10.0.0.0/8), an IP address or a host name (hooks.internal, *.svc.local)", setting, e))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// validHost reports whether h is a DNS name: labels of letters, digits,
// hyphens and underscores, at least one letter somewhere (so "10.0.0.0/33"
// or "1.2.3" is not taken for a name).
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	letter := false
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			switch {
			case c >= 'a' && c <= 'z':
				letter = true
			case c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return letter
}

// Private reports whether a is in a range jobs may not reach by default.
func Private(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, r := range refused {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether a job may connect to a.
func (p *Policy) AllowsAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !Private(a) {
		return true
	}
	if p == nil {
		return false
	}
	for _, pre := range p.prefixes {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// AllowsHost reports whether host is allowed by name: then it may resolve
// to any address, private ones included.
func (p *Policy) AllowsHost(host string) bool {
	if p == nil {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.hosts {
		if h == host || (strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:])) {
			return true
		}
	}
	return false
}

// CheckHost refuses, before any lookup, a host that is literally a refused
// address or "localhost" (and its subdomains, which resolve to loopback).
// A host name is otherwise allowed here: only the dialer knows what it
// resolves to. It is what a spec check at submit can say.
func (p *Policy) CheckHost(host string) error {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if p.AllowsHost(host) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !p.AllowsAddr(a) {
			return fmt.Errorf("%w: %s is a private, loopback or link-local address (allow it with %s)", ErrRefused, a, Setting)
		}
		return nil
	}
	if h := strings.ToLower(host); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		if !p.AllowsAddr(netip.MustParseAddr("127.0.0.1")) {
			return fmt.Errorf("%w: %s is loopback (allow it with %s)", ErrRefused, host, Setting)
		}
	}
	return nil
}

// CheckURL is CheckHost for an absolute URL's host. A URL that does not
// parse is not its concern (the caller's own check names that).
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil
	}
	return p.CheckHost(u.Hostname())
}

// control is the dialer's Control hook: it sees the address being
// connected, after resolution, on every connect (each redirect hop, each
// address a name resolved to).
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRefused, address, err)
	}
	if !p.AllowsAddr(ap.Addr()) {
		return fmt.Errorf("%w: %s is a private, loopback or link-local address (allow it with %s)", ErrRefused, ap.Addr(), Setting)
	}
	return nil
}

// DialContext dials like a net.Dialer with a 10s connect timeout, refusing
// what the policy refuses. A host the policy allows by name is dialed
// without the address check.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if host, _, err := net.SplitHostPort(addr); err != nil || !p.AllowsHost(host) {
		d.Control = p.control
	}
	return d.DialContext(ctx, network, addr)
}

// Transport returns an http.Transport that dials through the policy. It
// uses no proxy: a proxy would make the connections that the policy is
// there to check, so HTTP_PROXY and HTTPS_PROXY are not read.
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.DialContext
	return t
}

// String lists the policy's entries, for logs.
func (p *Policy) String() string {
	if p == nil {
		return ""
	}
	var out []string
	for _, pre := range p.prefixes {
		out = append(out, pre.String())
	}
	return strings.Join(slices.Concat(out, p.hosts), ",")
}

// MarshalText writes the policy as its entries, as Parse reads them: a
// runner publishes its policy to the fleet this way (package jobpolicy).
func (p *Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (p *Policy) UnmarshalText(b []byte) error {
	q, err := Parse(Setting, string(b))
	if err != nil {
		return err
	}
	*p = *q
	return nil
}
