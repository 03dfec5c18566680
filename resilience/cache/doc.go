// Package cache is a bounded, concurrency-safe cache of values that are
// expensive to load, with single-flight loading and a time to live: however
// many goroutines miss the same key at once, one call of the load function
// fetches the value, all of them get its result, and the value is served for
// TTL before it is loaded again.
//
// Most callers want New and Get, with a load function that captures no
// variables (so a hit allocates nothing):
//
//	c, err := cache.New[string, Settings](cache.Config{MaxEntries: 100, TTL: time.Minute})
//	...
//	s, err := c.Get(ctx, "settings", loadSettings)
//
// Errors are never cached, a panicking load is recovered and reported to its
// waiters as a *PanicError, and expiry is checked when an entry is read or
// room is needed: apart from loads, a Cache runs no goroutines and no timers.
// The zero Config is valid (1024 entries that never expire); the zero Cache
// is not usable, build one with New. Every method is safe for concurrent use.
// Package dnscache builds a cache of host name lookups on this one.
package cache
