package cache

import "github.com/MrVSiK/gotry/internal/clock"

// ConfigWithClock returns cfg with its clock replaced.
func ConfigWithClock(cfg Config, c clock.Clock) Config {
	cfg.clock = c
	return cfg
}

// Waiters returns the number of callers waiting for key's load in flight (0
// when none is).
func Waiters[K comparable, V any](c *Cache[K, V], key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.flights[key]; ok {
		return f.waiters
	}
	return 0
}
