package resilience

import (
	"slices"
	"strings"
	"time"
)

// Stats is a snapshot of an engine's state, for gauges: what its budget
// holds, and what its breakers, adaptive hedging and concurrency limit know
// per key. Take one with Engine.Stats (or the Stats of a Retrier or a
// transport); it is a copy that nothing updates afterwards.
type Stats struct {
	// BudgetTokens is how many retries or hedges the retry budget holds
	// now: what its window earned (deposits less what timeouts cost) and
	// did not spend (a retry or hedge that succeeded gave its token back),
	// plus what its reserve holds. The window's share is a ceiling, not
	// what the next retry may take: it pays only a client that earned at
	// least its reserve in the last second, no more than the last second
	// earned, and nothing while retries are failing (see
	// Settings.BudgetRatio); the reserve pays first. +Inf when the
	// budget is disabled.
	BudgetTokens float64
	// UntrackedAdmissions counts the calls served untracked (no breaker,
	// adaptive delay or concurrency limit) because every tracked key was
	// pinned by an open breaker (see Settings.MaxKeys). It only grows:
	// export it as a counter.
	UntrackedAdmissions uint64
	// MaxExtraLoad is adaptive hedging's cap on extra load
	// (AdaptiveHedging.MaxExtraLoad); 0 without adaptive hedging.
	MaxExtraLoad float64
	// Breakers reports that the engine keeps a circuit breaker per key
	// (Settings.Breaker is set). Without them every host's Breaker is
	// BreakerClosed and its BreakerFor 0.
	Breakers bool
	// Limited reports that the engine keeps a concurrency limit per key
	// (Settings.ConcurrencyLimit is set).
	Limited bool
	// Hosts holds one entry per tracked key, sorted by Key.
	Hosts []HostStats
}

// HostStats is what an engine knows of one key (for the transport, one
// host). Fields of a part the engine does not have are zero.
type HostStats struct {
	// Key is the call key: the transport's normalised host ("example.test",
	// "example.test:8080", "[::1]:8443"), or a Retrier's key.
	Key string
	// Breaker is the key's breaker state, as the next call would see it (an
	// open breaker whose OpenDuration has passed is half-open).
	Breaker BreakerState
	// BreakerFor is how long the breaker has been in that state, by the
	// engine's clock (a breaker whose open period ended is half-open since
	// that moment).
	BreakerFor time.Duration
	// HedgeDelay is the delay adaptive hedging hedges the key's calls after
	// now; 0 until the key's first adaptive call.
	HedgeDelay time.Duration
	// HedgeWarm reports that the key has enough recent results for
	// HedgeDelay to be learned rather than the cold default.
	HedgeWarm bool
	// Limit is the key's concurrency limit now, and InFlight the attempts
	// in flight under it (exempt ones included).
	Limit, InFlight int
	// Shed counts the attempts the limit refused. It only grows.
	Shed uint64
}

// Stats returns a snapshot of e's state, read with no lock held across keys
// (each key is read under its own). It allocates the Hosts slice: it is
// meant for gauges read at each metric collection, not for a request's
// path.
func (e *Engine) Stats() Stats {
	now := e.clock.Now()
	st := Stats{BudgetTokens: e.budget.Tokens(now), Breakers: e.breakers != nil, Limited: e.limit != nil}
	if e.adaptive != nil {
		st.MaxExtraLoad = e.adaptive.MaxExtraLoad
	}
	if e.hosts == nil {
		return st
	}
	st.UntrackedAdmissions = e.hosts.untracked.Load()
	e.hosts.each(func(h *host) {
		hs := HostStats{Key: h.key}
		if e.breakers != nil {
			s, since := e.breakers.stateOf(&h.br, now)
			hs.Breaker, hs.BreakerFor = s, max(now.Sub(since), 0)
		}
		if k := h.hedge.Load(); k != nil {
			hs.HedgeDelay, hs.HedgeWarm = k.current(now), k.warm.Load()
		}
		if l := h.lim; l != nil {
			hs.Limit, hs.InFlight, hs.Shed = l.Limit(), l.inFlight(), l.shed.Load()
		}
		st.Hosts = append(st.Hosts, hs)
	})
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
