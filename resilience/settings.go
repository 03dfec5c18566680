package resilience

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/MrVSiK/gotry/clock"
)

// Settings is the configuration of an Engine, of a Retrier (its options
// set it) and of package transport's Transport (the same options set it
// there): one type, one set of defaults, one validation. A zero field
// takes its default (DefaultSettings lists them all); Off turns off the
// budget and the wait for a server-dictated delay. Retrier.Settings,
// transport.Transport.Settings and Engine.Settings report it back with
// every default filled in: the values in effect, for a service that logs
// its configuration at start-up.
type Settings struct {
	// MaxAttempts bounds a call's attempts, retries and hedges together
	// (WithMaxAttempts). Default DefaultMaxAttempts; 1 for no retry.
	MaxAttempts int
	// Backoff gives the delay before a retry when nothing else is in
	// flight (WithBackoff). Default DefaultBackoff; Constant(0) for no
	// delay.
	Backoff Backoff
	// PerAttemptTimeout cuts one attempt off (WithPerAttemptTimeout).
	// Default none. Such a timeout is retryable.
	PerAttemptTimeout time.Duration
	// HedgeDelay and MaxHedges hedge after a fixed delay, when both are
	// positive (WithHedging). Default none.
	HedgeDelay time.Duration
	MaxHedges  int
	// AdaptiveHedging, when set, hedges after a delay learned per key
	// instead, with at most MaxHedges (default 1) extra attempts in flight
	// (WithAdaptiveHedging); HedgeDelay must then be 0. Default none.
	AdaptiveHedging *AdaptiveHedging
	// BudgetRatio and BudgetReserve set the retry budget that every retry
	// and hedge pays from, and that learns whether retries work
	// (WithRetryBudget): a retry or hedge pays a token as it launches and
	// gets it back if it succeeds. A reserve of BudgetReserve retries pays
	// first, refilled by successes (one a second at most), so it is spent
	// once in an outage, not every second; then each successful call's
	// deposit of BudgetRatio tokens, which expire after 10 s, pays a busy
	// client while its retries work and the last second earned it too. An
	// attempt that times out costs a token more. For N engines sharing a
	// downstream, failed retries ≤ BudgetRatio × successes + N ×
	// BudgetReserve (plus refills), so an outage, where nothing succeeds,
	// costs each engine its reserve, however long (the bound in full, and
	// what a client gets at each failure rate, is in the budget's doc).
	// Default DefaultBudgetRatio and DefaultBudgetReserve; Off sets either
	// to none, both Off disable the budget. The ratio must be finite and
	// not negative, the reserve at most 1000. The budget is lock-free, and
	// a call that succeeds costs it one atomic add and one load.
	BudgetRatio   float64
	BudgetReserve int
	// Breaker, when set, keeps a circuit breaker per key (WithBreaker).
	// Default none.
	Breaker *BreakerConfig
	// ConcurrencyLimit, when set, keeps an adaptive concurrency limit per
	// key (WithConcurrencyLimit). Default none.
	ConcurrencyLimit *ConcurrencyLimit
	// MaxKeys bounds how many keys (hosts, for the transport) the
	// breakers, adaptive hedging and the concurrency limit track, together
	// (WithMaxKeys): each key's state is one entry (see
	// Stats.UntrackedAdmissions for what happens when all are pinned).
	// Default DefaultMaxKeys.
	MaxKeys int
	// MaxRetryAfter is the longest server-dictated delay waited for
	// (WithMaxRetryAfter); a longer one ends the call. Default
	// DefaultMaxRetryAfter; Off honours only a zero delay.
	MaxRetryAfter time.Duration
	// Clock is the time source (WithClock). Default the wall clock; tests
	// inject a fake.
	Clock clock.Clock
}

// DefaultSettings returns the settings in effect when none is given: 3
// attempts, DefaultBackoff, a budget of DefaultBudgetRatio and
// DefaultBudgetReserve, a Retry-After cap of DefaultMaxRetryAfter,
// DefaultMaxKeys keys, the wall clock, and no per-attempt timeout,
// hedging, breaker or limit. It is Settings{} with its defaults filled in.
func DefaultSettings() Settings { return Settings{}.inEffect() }

// inEffect returns s with every zero field, its configuration structs'
// too, at its default. It shares no configuration struct with s.
func (s Settings) inEffect() Settings {
	if s.MaxAttempts == 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.Backoff == nil {
		s.Backoff = DefaultBackoff()
	}
	if s.BudgetRatio == 0 {
		s.BudgetRatio = DefaultBudgetRatio
	}
	if s.BudgetReserve == 0 {
		s.BudgetReserve = DefaultBudgetReserve
	}
	if s.MaxKeys == 0 {
		s.MaxKeys = DefaultMaxKeys
	}
	if s.MaxRetryAfter == 0 {
		s.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if s.Clock == nil {
		s.Clock = clock.Real()
	}
	if a := s.AdaptiveHedging; a != nil {
		f := a.inEffect()
		s.AdaptiveHedging = &f
		if s.MaxHedges == 0 {
			s.MaxHedges = 1
		}
	}
	if b := s.Breaker; b != nil {
		f := b.withDefaults()
		s.Breaker = &f
	}
	if l := s.ConcurrencyLimit; l != nil {
		f, _ := l.filled()
		s.ConcurrencyLimit = &f
	}
	return s
}

// offOr returns 0 for Off, v otherwise: a setting that is off, as the
// budget and the engine's policy take it.
func offOr[T int | float64 | time.Duration](v T) T {
	if v == Off {
		return 0
	}
	return v
}

// Validate checks s, returning an error that names the first field that
// makes no sense.
func (s Settings) Validate() error {
	switch {
	case s.MaxAttempts < 0:
		return fmt.Errorf("resilience: Settings.MaxAttempts must not be negative, got %d", s.MaxAttempts)
	case s.Backoff != nil && isNil(s.Backoff):
		return errors.New("resilience: Settings.Backoff must not be a nil BackoffFunc (nil for the default, Constant(0) for no delay)")
	case s.PerAttemptTimeout < 0:
		return fmt.Errorf("resilience: Settings.PerAttemptTimeout must not be negative, got %v", s.PerAttemptTimeout)
	case s.HedgeDelay < 0:
		return fmt.Errorf("resilience: Settings.HedgeDelay must not be negative, got %v", s.HedgeDelay)
	case s.MaxHedges < 0:
		return fmt.Errorf("resilience: Settings.MaxHedges must not be negative, got %d", s.MaxHedges)
	case s.AdaptiveHedging != nil && s.HedgeDelay != 0:
		return fmt.Errorf("resilience: Settings.HedgeDelay must be 0 with AdaptiveHedging, got %v", s.HedgeDelay)
	case math.IsNaN(s.BudgetRatio) || math.IsInf(s.BudgetRatio, 0) || s.BudgetRatio < 0 && s.BudgetRatio != Off:
		return fmt.Errorf("resilience: Settings.BudgetRatio must be finite and not negative, or Off, got %v", s.BudgetRatio)
	case s.BudgetReserve < 0 && s.BudgetReserve != Off || s.BudgetReserve > maxReserve:
		return fmt.Errorf("resilience: Settings.BudgetReserve must be between 0 and %d, or Off, got %d", maxReserve, s.BudgetReserve)
	case s.MaxKeys < 0:
		return fmt.Errorf("resilience: Settings.MaxKeys must not be negative, got %d", s.MaxKeys)
	case s.MaxRetryAfter < 0 && s.MaxRetryAfter != Off:
		return fmt.Errorf("resilience: Settings.MaxRetryAfter must not be negative, or must be Off, got %v", s.MaxRetryAfter)
	}
	if s.AdaptiveHedging != nil {
		if err := s.AdaptiveHedging.Validate(); err != nil {
			return err
		}
	}
	if s.Breaker != nil {
		if err := s.Breaker.Validate(); err != nil {
			return err
		}
	}
	if s.ConcurrencyLimit != nil {
		if err := s.ConcurrencyLimit.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// clone returns a copy of s that shares no configuration struct with it.
func (s Settings) clone() Settings {
	s.AdaptiveHedging = clonePtr(s.AdaptiveHedging)
	s.Breaker = clonePtr(s.Breaker)
	s.ConcurrencyLimit = clonePtr(s.ConcurrencyLimit)
	return s
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// policy returns the policy that s gives a call whose Policy is zero. s
// is in effect.
func (s Settings) policy() Policy {
	return Policy{
		MaxAttempts:       s.MaxAttempts,
		MaxHedges:         s.MaxHedges,
		HedgeDelay:        s.HedgeDelay,
		Backoff:           s.Backoff,
		PerAttemptTimeout: s.PerAttemptTimeout,
		MaxRetryAfter:     s.MaxRetryAfter,
	}
}

// Policy is the retry and hedging policy of one call (Call.Policy). A
// zero field takes the engine's setting (see Engine.Policy), so the zero
// Policy runs a call as the engine was configured; Off turns off what the
// engine has on. Execute does not check a Policy: a field Validate rejects
// acts as its nearest sensible value.
type Policy struct {
	// MaxAttempts bounds the attempts of a call, retries and hedges
	// together.
	MaxAttempts int
	// MaxHedges is how many extra attempts may be in flight beside the
	// first; Off for none. Hedging is on when MaxHedges and HedgeDelay are
	// positive, or when MaxHedges is and the engine hedges adaptively (see
	// AdaptiveHedging) and HedgeDelay is 0.
	MaxHedges int
	// HedgeDelay is how long to wait for a result before launching a
	// hedge: a fixed delay instead of the engine's, adaptive or fixed. Off
	// for none: the call neither hedges nor takes part in the engine's
	// adaptive hedging (its latency is not learned from).
	HedgeDelay time.Duration
	// Backoff gives the delay before a retry when nothing else is in
	// flight.
	Backoff Backoff
	// PerAttemptTimeout cuts off one attempt (not the whole call) until
	// its result arrives; Off for none. Such a timeout is retryable.
	PerAttemptTimeout time.Duration
	// MaxRetryAfter is the longest server-dictated delay the engine will
	// honour; a longer one ends the call. Off honours only a zero delay.
	MaxRetryAfter time.Duration
	// Criticality orders the call under the concurrency limit (see
	// ConcurrencyLimit); the zero value is CriticalityDefault.
	Criticality Criticality
	// NoLimit exempts the call from the concurrency limit: its attempts
	// never wait or are shed (they are still counted in flight).
	NoLimit bool
}

// Validate checks p, naming the first field that makes no sense.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("resilience: Policy.MaxAttempts must not be negative, got %d", p.MaxAttempts)
	case p.MaxHedges < 0 && p.MaxHedges != Off:
		return fmt.Errorf("resilience: Policy.MaxHedges must not be negative, or must be Off, got %d", p.MaxHedges)
	case p.HedgeDelay < 0 && p.HedgeDelay != Off:
		return fmt.Errorf("resilience: Policy.HedgeDelay must not be negative, or must be Off, got %v", p.HedgeDelay)
	case p.Backoff != nil && isNil(p.Backoff):
		return errors.New("resilience: Policy.Backoff must not be a nil BackoffFunc")
	case p.PerAttemptTimeout < 0 && p.PerAttemptTimeout != Off:
		return fmt.Errorf("resilience: Policy.PerAttemptTimeout must not be negative, or must be Off, got %v", p.PerAttemptTimeout)
	case p.MaxRetryAfter < 0 && p.MaxRetryAfter != Off:
		return fmt.Errorf("resilience: Policy.MaxRetryAfter must not be negative, or must be Off, got %v", p.MaxRetryAfter)
	case p.Criticality < CriticalitySheddable || p.Criticality > CriticalityCritical:
		return fmt.Errorf("resilience: Policy.Criticality must be one of the criticalities, got %d", int(p.Criticality))
	}
	return nil
}
