package transport

import (
	"net/netip"
	"net/url"
	"strings"
)

// hostKey returns the key of u's breaker: the host as a server sees it, so
// every spelling of one server shares one breaker. Host names are lower-cased
// (DNS names are case-insensitive), an IPv6 literal takes its canonical form
// in brackets ("[0:0::1]" is "[::1]"; a zone is kept), and the scheme's
// default port is dropped (80 for http, 443 for https), so "example.test",
// "EXAMPLE.test" and "example.test:80" are one key for http, and "[::1]" and
// "[::1]:80" another. Any other port is kept: "example.test:8080". A URL with
// no host gives "", which the engine takes as no breaker.
//
// The key is also what hooks and telemetry report as the host of breaker
// events. In the common case (a lower-case name, with or without a port) it
// is u.Host or a prefix of it, and costs no allocation.
func hostKey(u *url.URL) string {
	if plainHost(u.Host) {
		return u.Host // the common case, in one scan: a lower-case name with no port
	}
	host, port := u.Hostname(), u.Port()
	if port == defaultPort(u.Scheme) {
		port = ""
	}
	if strings.IndexByte(host, ':') >= 0 { // an IPv6 literal
		if a, err := netip.ParseAddr(host); err == nil {
			host = a.String()
		} else {
			host = strings.ToLower(host)
		}
		host = "[" + host + "]"
	} else if lower := strings.ToLower(host); lower != host {
		host = lower
	} else if port != "" {
		return u.Host // already "host:port", as it would be rebuilt
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

// plainHost reports whether h is non-empty and only lower-case letters,
// digits, dots and hyphens: a host name that is its own key.
func plainHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			return false
		}
	}
	return h != ""
}

// defaultPort is the port a scheme implies when a URL names none ("" when it
// implies none that we know of).
func defaultPort(scheme string) string {
	switch {
	case strings.EqualFold(scheme, "http"):
		return "80"
	case strings.EqualFold(scheme, "https"):
		return "443"
	}
	return ""
}
