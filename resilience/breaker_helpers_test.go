package resilience

import (
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Helpers for the tests of the breakers and the per-host table: the
// engine itself finds a call's host once and asks its breaker through
// allow.

// Config returns the effective configuration, defaults filled in.
func (b *breakerSet) Config() BreakerConfig { return b.cfg }

// Untracked returns how many calls were served untracked (see hostTable).
// It only grows; export it as a counter.
func (b *breakerSet) Untracked() uint64 { return b.hosts.untracked.Load() }

// Len returns the number of tracked keys.
func (b *breakerSet) Len() int { return b.hosts.Len() }

// State returns key's state at now; an untracked key is closed.
func (b *breakerSet) State(key string, now time.Time) BreakerState {
	h := b.hosts.lookup(key)
	if h == nil {
		return BreakerClosed
	}
	s, _ := b.stateOf(&h.br, now)
	return s
}

// Each calls fn with every tracked key, its state at now and when it
// entered that state. fn runs without any breaker lock held; states may
// change while Each runs.
func (b *breakerSet) Each(now time.Time, fn func(key string, state BreakerState, since time.Time)) {
	b.hosts.each(func(h *host) {
		st, since := b.stateOf(&h.br, now)
		fn(h.key, st, since)
	})
}

// admit and admitRetry are allow for a key (the engine calls allow itself,
// having found the host once for the whole call).
func (b *breakerSet) admit(key string, now time.Time) (ticket, transition, error) {
	in := when(now)
	h := b.hosts.get(key, in)
	if h == nil {
		b.hosts.untrackedCall()
	}
	return b.allow(h, key, in, true)
}

func (b *breakerSet) admitRetry(key string, now time.Time) (ticket, transition, error) {
	return b.allow(b.hosts.lookup(key), key, when(now), false)
}

// when is the instant of a decision at now, for the tests of the parts,
// which pass the time rather than read a clock.
func when(now time.Time) *instant {
	in := instant{sec: now.Unix(), at: now, hasSec: true, hasAt: true}
	return &in
}

// whenOn is when on clock c, for what also reads c (the limit's wait).
func whenOn(c clock.Clock, now time.Time) *instant {
	in := instant{src: clock.SecondsOf(c), sec: now.Unix(), at: now, hasSec: true, hasAt: true}
	return &in
}

// Len returns the number of tracked keys.
func (t *hostTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
