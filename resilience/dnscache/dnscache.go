package dnscache

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/internal/kiterr"
	"github.com/MrVSiK/gotry/resilience/cache"
)

// ConfigError is the error New returns for an invalid Config: Config is
// "dnscache.Config", Option the field's name and Reason what is wrong with
// it. Find it with errors.As. (The type is shared with the other kit
// packages.)
type ConfigError = kiterr.ConfigError

// defaultTTL is how long a Cache keeps a name when Config.TTL is 0.
const defaultTTL = time.Minute

// Resolver resolves host names to addresses. *net.Resolver satisfies it.
type Resolver interface {
	// LookupHost returns the addresses of host, as net.Resolver.LookupHost
	// does. It must be safe for concurrent use.
	LookupHost(ctx context.Context, host string) (addrs []string, err error)
}

// Config configures a Cache. Its zero value is valid: up to 1024 names, each
// kept for one minute, resolved by net.DefaultResolver and dialled with a zero
// net.Dialer.
type Config struct {
	// TTL is how long resolved addresses are reused, the same for every
	// name; the TTLs of the DNS records themselves are not consulted. It
	// must not be negative; 0 means one minute.
	TTL time.Duration
	// MaxEntries bounds the number of names cached. It must not be
	// negative; 0 means 1024. When full, expired names go first, then the
	// least recently used one.
	MaxEntries int
	// Resolver looks names up on a miss; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer dials the resolved addresses in DialContext; nil means a zero
	// net.Dialer. It is copied by New. Its Timeout applies to each
	// address tried, and its own Resolver is never used, since it is only
	// given IP addresses.
	Dialer *net.Dialer

	// dial replaces Dialer.DialContext; tests use it (export_test.go) to see
	// which addresses are dialled without touching the network.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Cache caches host name lookups for a fixed TTL, with the single-flight
// loading of cache.Cache: concurrent lookups of one name share one query. Names are
// matched case-insensitively, and a fully qualified name with its trailing
// dot ("example.com.") is the same entry as the name without it; the
// resolver is asked for the lower-case name without the dot. IP literals are
// returned as given, without a lookup.
//
// Failed lookups are not cached, and their errors come back unchanged: a
// *net.DNSError stays one, IsNotFound and all, for errors.As to find. A
// caller whose context ends while waiting gets ctx.Err(), and a Resolver that
// panics is recovered: its waiters get a *cache.PanicError matching
// cache.ErrPanic.
//
// DialContext resolves through the cache and fits http.Transport.DialContext
// as is. A Cache is safe for concurrent use. A hit costs what a cache.Cache
// hit does, plus, for LookupHost, copying the address slice (DialContext reads
// the cached slice in place).
type Cache struct {
	cache    *cache.Cache[string, []string]
	resolver Resolver
	dial     func(ctx context.Context, network, address string) (net.Conn, error)
}

// New validates cfg and returns an empty cache. A negative TTL or MaxEntries
// yields a *ConfigError naming it.
func New(cfg Config) (*Cache, error) {
	const name = "dnscache.Config"
	switch {
	case cfg.TTL < 0:
		return nil, kiterr.Configf(name, "TTL", "must not be negative, got %v", cfg.TTL)
	case cfg.MaxEntries < 0:
		return nil, kiterr.Configf(name, "MaxEntries", "must not be negative, got %d", cfg.MaxEntries)
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	c, err := cache.New[string, []string](cache.Config{MaxEntries: cfg.MaxEntries, TTL: ttl})
	if err != nil {
		return nil, err // unreachable: both fields were checked above
	}
	d := &Cache{cache: c, resolver: cfg.Resolver, dial: cfg.dial}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	if d.dial == nil {
		var dialer net.Dialer
		if cfg.Dialer != nil {
			dialer = *cfg.Dialer
		}
		d.dial = dialer.DialContext
	}
	return d, nil
}

// LookupHost returns the addresses of host, from the cache when it holds a
// live entry and from the resolver otherwise. The returned slice is the
// caller's own copy.
func (d *Cache) LookupHost(ctx context.Context, host string) ([]string, error) {
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	return slices.Clone(addrs), nil
}

// lookup is LookupHost without the copy: the slice it returns is shared and
// must not be modified.
func (d *Cache) lookup(ctx context.Context, host string) ([]string, error) {
	if isIPLiteral(host) {
		return []string{host}, nil
	}
	key := strings.ToLower(strings.TrimSuffix(host, "."))
	if key == "" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	// Checking first keeps hits free of the closure allocation below.
	if addrs, ok := d.cache.Peek(key); ok {
		return addrs, nil
	}
	return d.cache.Get(ctx, key, func(ctx context.Context) ([]string, error) {
		addrs, err := d.resolver.LookupHost(ctx, key)
		if err == nil && len(addrs) == 0 {
			// A resolver that finds nothing should say so; don't cache it.
			err = &net.DNSError{Err: "no such host", Name: key, IsNotFound: true}
		}
		return addrs, err
	})
}

// DialContext connects to address on the named network, resolving the host
// part through the cache and trying its addresses in the order the resolver
// gave them until one connects. It returns the first dial error when all
// fail. On "tcp4"/"udp4" and "tcp6"/"udp6" only addresses of that family are
// tried. Addresses whose host is an IP literal or empty, and networks other
// than tcp and udp, go straight to the dialer. A lookup failure comes back as
// a *net.OpError wrapping the resolver's error, as net.Dialer reports it.
func (d *Cache) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return d.dial(ctx, network, address)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil || host == "" || isIPLiteral(host) {
		return d.dial(ctx, network, address)
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var first error
	for _, a := range addrs {
		if !familyFits(network, a) {
			continue
		}
		if err := ctx.Err(); err != nil {
			if first == nil {
				first = &net.OpError{Op: "dial", Net: network, Err: err}
			}
			break
		}
		conn, err := d.dial(ctx, network, net.JoinHostPort(a, port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = &net.OpError{Op: "dial", Net: network,
			Err: &net.AddrError{Err: "no suitable address found", Addr: host}}
	}
	return nil, first
}

// isIPLiteral reports whether host is an IP address (an IPv6 one possibly
// with a zone). Host names that cannot be addresses are turned away before
// netip parses them, since a parse failure allocates its error.
func isIPLiteral(host string) bool {
	if !strings.Contains(host, ":") && strings.Trim(host, "0123456789.") != "" {
		return false
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// familyFits reports whether address a may be dialled on network: any
// address on "tcp" and "udp", IPv4 only on the "4" networks and IPv6 only on
// the "6" ones.
func familyFits(network, a string) bool {
	switch network[len(network)-1] {
	case '4':
		ip, err := netip.ParseAddr(a)
		return err == nil && ip.Unmap().Is4()
	case '6':
		ip, err := netip.ParseAddr(a)
		return err == nil && ip.Is6() && !ip.Is4In6()
	}
	return true
}
