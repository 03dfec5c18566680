package resilience

import (
	"context"
	"net"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Test-only access to the unexported knobs of Schedule, Periodic, Cache and
// DNSCache, for the external test package.

// ScheduleConfigWithRand returns cfg with its random source replaced.
func ScheduleConfigWithRand(cfg ScheduleConfig, randN func(n int64) int64) ScheduleConfig {
	cfg.randN = randN
	return cfg
}

// AddJitterWithRand is AddJitter with the random source as a parameter.
func AddJitterWithRand(d, jitter time.Duration, randN func(n int64) int64) time.Duration {
	return addJitter(d, jitter, randN)
}

// WithPeriodicClock runs a Periodic on c.
func WithPeriodicClock(c clock.Clock) PeriodicOption { return withPeriodicClock(c) }

// WithPeriodicRand pins a Periodic's jitter draws.
func WithPeriodicRand(randN func(n int64) int64) PeriodicOption { return withPeriodicRandN(randN) }

// CacheConfigWithClock returns cfg with its clock replaced.
func CacheConfigWithClock(cfg CacheConfig, c clock.Clock) CacheConfig {
	cfg.clock = c
	return cfg
}

// CacheWaiters returns the number of callers waiting for key's load in
// flight (0 when none is).
func CacheWaiters[K comparable, V any](c *Cache[K, V], key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.flights[key]; ok {
		return f.waiters
	}
	return 0
}

// DNSCacheConfigWithClock returns cfg with its clock replaced.
func DNSCacheConfigWithClock(cfg DNSCacheConfig, c clock.Clock) DNSCacheConfig {
	cfg.clock = c
	return cfg
}

// DNSCacheConfigWithDial returns cfg with Dialer.DialContext replaced by dial.
func DNSCacheConfigWithDial(cfg DNSCacheConfig, dial func(ctx context.Context, network, address string) (net.Conn, error)) DNSCacheConfig {
	cfg.dial = dial
	return cfg
}

// DNSCacheWaiters returns the number of callers waiting for host's lookup.
func DNSCacheWaiters(d *DNSCache, host string) int { return CacheWaiters(d.cache, host) }
