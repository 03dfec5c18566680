package resilience

import (
	"time"
)

// Stats is a snapshot of an engine's state, for gauges: its budget and
// every tracked key's breaker, adaptive hedging delay and concurrency
// limit. Taking one allocates (a slice of every tracked key); it is meant
// for a metrics scrape, not for the request path.
type Stats struct {
	// BudgetTokens is how many retries or hedges the budget would allow
	// now (+Inf without a budget).
	BudgetTokens float64
	// UntrackedAdmissions counts the calls served untracked because every
	// tracked key was pinned by an open breaker (see EngineConfig.MaxKeys).
	// It only grows.
	UntrackedAdmissions uint64
	// MaxExtraLoad is adaptive hedging's cap on extra load, 0 without it.
	MaxExtraLoad float64
	// Hosts holds one entry per tracked key, sorted by key; empty when the
	// engine keeps no per-key state.
	Hosts []HostStats
}

// HostStats is one key's part of Stats. Fields of a part the engine does
// not have configured are zero.
type HostStats struct {
	Key string
	// Breaker is the key's breaker state and BreakerFor how long it has
	// been in it (a breaker whose open period ended is half-open since
	// then).
	Breaker    BreakerState
	BreakerFor time.Duration
	// HedgeDelay is the key's learned hedge delay and HedgeWarm whether it
	// has enough samples; both zero until the key's first adaptive call.
	HedgeDelay time.Duration
	HedgeWarm  bool
	// Limit and InFlight are the key's concurrency limit and the attempts
	// in flight under it; Shed counts the attempts it refused (it only
	// grows).
	Limit, InFlight int
	Shed            uint64
}

// Stats returns a snapshot of e's state. Safe for concurrent use; the
// parts are read one after the other, so a snapshot taken while calls run
// is not one instant.
func (e *Engine) Stats() Stats {
	now := e.clock.Now()
	s := Stats{BudgetTokens: e.budget.Tokens(now)}
	if e.adaptive != nil {
		s.MaxExtraLoad = e.adaptive.MaxExtraLoad
	}
	if e.hosts == nil {
		return s
	}
	s.UntrackedAdmissions = e.hosts.untracked.Load()
	e.hosts.each(func(h *host) {
		hs := HostStats{Key: h.key}
		if e.breakers != nil {
			st, since := e.breakers.stateOf(&h.br, now)
			hs.Breaker, hs.BreakerFor = st, max(now.Sub(since), 0)
		}
		if k := h.hedge.Load(); k != nil {
			hs.HedgeDelay, hs.HedgeWarm = k.current(now), k.warm.Load()
		}
		if l := h.lim; l != nil {
			hs.Limit, hs.InFlight, hs.Shed = l.Limit(), l.inFlight(), l.shed.Load()
		}
		s.Hosts = append(s.Hosts, hs)
	})
	return s
}
