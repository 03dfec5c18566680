// Package dnscache caches host name lookups for a fixed time, with
// single-flight loading: concurrent lookups of one name share one query. It
// is built on package cache.
//
// Most callers want New and the Cache's DialContext, which drops into an
// http.Transport so every connection it opens resolves through the cache:
//
//	dns, err := dnscache.New(dnscache.Config{TTL: 30 * time.Second})
//	...
//	transport := &http.Transport{DialContext: dns.DialContext}
//
// LookupHost answers the same questions directly. One TTL applies to every
// name (the TTLs of the DNS records are not consulted); failed lookups are not
// cached and keep their *net.DNSError. The zero Config is valid (1024 names,
// one minute each, net.DefaultResolver, a zero net.Dialer); the zero Cache is
// not usable, build one with New. A Cache is safe for concurrent use.
package dnscache
