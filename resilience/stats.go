package resilience

import (
	"slices"
	"strings"
	"time"
)

// Stats is a snapshot of an engine's state, for gauges: what its budget
// holds, what its breakers and adaptive hedging know per key. Take one with
// Engine.Stats (or the Stats of a Retrier or a transport); it is a copy,
// read at one moment, that nothing updates afterwards.
type Stats struct {
	// BudgetTokens is how many retries or hedges the retry budget would
	// allow now; +Inf when the budget is disabled.
	BudgetTokens float64
	// UntrackedAdmissions counts the calls admitted without a breaker
	// because every breaker in their key's shard was open (see
	// BreakerConfig.MaxBreakers). It only grows: export it as a counter. 0
	// when breaking is off.
	UntrackedAdmissions uint64
	// MaxExtraLoad is adaptive hedging's cap on extra load
	// (AdaptiveHedging.MaxExtraLoad); 0 without adaptive hedging.
	MaxExtraLoad float64
	// Breakers reports that the engine keeps a circuit breaker per key
	// (EngineConfig.Breaker is set). Without them every host's Breaker is
	// BreakerClosed and its BreakerFor 0.
	Breakers bool
	// Hosts holds one entry per key that a breaker or adaptive hedging
	// tracks, sorted by Key.
	Hosts []HostStats
}

// HostStats is what an engine knows of one key (for the transport, one
// host).
type HostStats struct {
	// Key is the call key: the transport's normalised host ("example.test",
	// "example.test:8080", "[::1]:8443"), or a Retrier's key.
	Key string
	// Breaker is the key's breaker state, as the next call would see it (an
	// open breaker whose OpenDuration has passed is half-open);
	// BreakerClosed when the key has no breaker.
	Breaker BreakerState
	// BreakerFor is how long the breaker has been in that state, by the
	// engine's clock (a breaker whose open period ended is half-open since
	// that moment); 0 when the key has no breaker.
	BreakerFor time.Duration
	// HedgeDelay is the delay adaptive hedging hedges the key's calls after
	// now; 0 when adaptive hedging does not track the key.
	HedgeDelay time.Duration
	// HedgeWarm reports that the key has enough recent results for
	// HedgeDelay to be learned rather than the cold default.
	HedgeWarm bool
}

// Stats returns a snapshot of e's budget, breakers and adaptive hedging
// state, read with no lock held across keys (each key is read under its
// own). It allocates the Hosts slice and a little more per key: it is
// meant for gauges read at each metric collection, not for a request's
// path.
func (e *Engine) Stats() Stats {
	now := e.clock.Now()
	st := Stats{BudgetTokens: e.budget.Tokens(now)}
	byKey := map[string]int{} // index in st.Hosts
	host := func(key string) *HostStats {
		i, ok := byKey[key]
		if !ok {
			i = len(st.Hosts)
			byKey[key] = i
			st.Hosts = append(st.Hosts, HostStats{Key: key})
		}
		return &st.Hosts[i]
	}
	if e.breakers != nil {
		st.Breakers = true
		st.UntrackedAdmissions = e.breakers.Untracked()
		e.breakers.Each(now, func(key string, s BreakerState, since time.Time) {
			h := host(key)
			h.Breaker, h.BreakerFor = s, now.Sub(since)
		})
	}
	if e.hedgers != nil {
		st.MaxExtraLoad = e.hedgers.cfg.MaxExtraLoad
		e.hedgers.each(now, func(key string, d time.Duration, warm bool) {
			h := host(key)
			h.HedgeDelay, h.HedgeWarm = d, warm
		})
	}
	slices.SortFunc(st.Hosts, func(a, b HostStats) int { return strings.Compare(a.Key, b.Key) })
	return st
}

// Host returns the entry of key in s.Hosts, and whether there is one.
func (s Stats) Host(key string) (HostStats, bool) {
	i, ok := slices.BinarySearchFunc(s.Hosts, key, func(h HostStats, k string) int { return strings.Compare(h.Key, k) })
	if !ok {
		return HostStats{}, false
	}
	return s.Hosts[i], true
}
