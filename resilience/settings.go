package resilience

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/clock"
)

// Settings is the configuration that the Retrier's options and package
// transport's options both build: one type, with one set of defaults
// (DefaultSettings) and one validation (Validate), so that an option of the
// same name sets the same field, starts from the same default and rejects
// the same nonsense in both packages. Every field holds the value in
// effect: none means "the default" by being zero.
//
// Users set it through the options. Retrier.Settings (and
// transport.Transport.Settings) give it back, for a service that logs its
// configuration at start-up; EngineConfig and Policy turn it into what
// NewEngine and Execute take, for an Engine configured with the same
// vocabulary.
type Settings struct {
	// MaxAttempts bounds a call's attempts, retries and hedges together
	// (WithMaxAttempts; at least 1).
	MaxAttempts int
	// Backoff gives the delay before a retry when nothing else is in
	// flight (WithBackoff; not nil).
	Backoff Backoff
	// PerAttemptTimeout cuts one attempt off; 0 for none
	// (WithPerAttemptTimeout).
	PerAttemptTimeout time.Duration
	// HedgeDelay and MaxHedges hedge after a fixed delay, when both are
	// positive (WithHedging).
	HedgeDelay time.Duration
	MaxHedges  int
	// AdaptiveHedging, when set, hedges after a delay learned per key
	// instead, with at most MaxHedges (at least 1) extra attempts in flight
	// (WithAdaptiveHedging); HedgeDelay is then 0.
	AdaptiveHedging *AdaptiveHedging
	// BudgetRatio and BudgetReserve are the retry budget; both 0 disable it
	// (WithRetryBudget).
	BudgetRatio   float64
	BudgetReserve int
	// Breaker, when set, keeps a circuit breaker per key (WithBreaker).
	Breaker *BreakerConfig
	// ConcurrencyLimit, when set, keeps an adaptive concurrency limit per
	// key (WithConcurrencyLimit).
	ConcurrencyLimit *ConcurrencyLimit
	// MaxKeys bounds how many keys (hosts, for the transport) the per-key
	// state tracks (WithMaxKeys; transport.WithMaxHosts; at least 1).
	MaxKeys int
	// MaxRetryAfter is the longest server-dictated delay waited for
	// (WithMaxRetryAfter; not negative).
	MaxRetryAfter time.Duration
	// Clock is the time source (WithClock; not nil).
	Clock clock.Clock
}

// DefaultSettings returns the settings with no option given: 3 attempts,
// DefaultBackoff, a budget of DefaultBudgetRatio and DefaultBudgetReserve,
// a Retry-After cap of DefaultMaxRetryAfter, DefaultMaxKeys keys, the wall
// clock, and no per-attempt timeout, hedging, breaker or limit.
func DefaultSettings() Settings {
	return Settings{
		MaxAttempts:   DefaultMaxAttempts,
		Backoff:       DefaultBackoff(),
		BudgetRatio:   DefaultBudgetRatio,
		BudgetReserve: DefaultBudgetReserve,
		MaxKeys:       DefaultMaxKeys,
		MaxRetryAfter: DefaultMaxRetryAfter,
		Clock:         clock.Real(),
	}
}

// Validate checks s, returning an error that names the first field that
// makes no sense.
func (s Settings) Validate() error {
	switch {
	case s.MaxAttempts < 1:
		return fmt.Errorf("resilience: Settings.MaxAttempts must be at least 1, got %d", s.MaxAttempts)
	case isNil(s.Backoff):
		return errors.New("resilience: Settings.Backoff must not be nil (use Constant(0) for no delay)")
	case s.PerAttemptTimeout < 0:
		return fmt.Errorf("resilience: Settings.PerAttemptTimeout must not be negative, got %v", s.PerAttemptTimeout)
	case s.HedgeDelay < 0:
		return fmt.Errorf("resilience: Settings.HedgeDelay must not be negative, got %v", s.HedgeDelay)
	case s.MaxHedges < 0:
		return fmt.Errorf("resilience: Settings.MaxHedges must not be negative, got %d", s.MaxHedges)
	case s.AdaptiveHedging != nil && s.MaxHedges < 1:
		return fmt.Errorf("resilience: Settings.MaxHedges must be at least 1 with AdaptiveHedging, got %d", s.MaxHedges)
	case s.AdaptiveHedging != nil && s.HedgeDelay != 0:
		return fmt.Errorf("resilience: Settings.HedgeDelay must be 0 with AdaptiveHedging, got %v", s.HedgeDelay)
	case s.MaxKeys < 1:
		return fmt.Errorf("resilience: Settings.MaxKeys must be at least 1, got %d", s.MaxKeys)
	case s.MaxRetryAfter < 0:
		return fmt.Errorf("resilience: Settings.MaxRetryAfter must not be negative, got %v", s.MaxRetryAfter)
	case s.Clock == nil:
		return errors.New("resilience: Settings.Clock must not be nil")
	}
	if err := validateBudget(s.BudgetRatio, s.BudgetReserve); err != nil {
		return err
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

// Clone returns a copy of s that shares no configuration struct with it.
func (s Settings) Clone() Settings {
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

// EngineConfig returns the engine-wide part of s (budget, breakers,
// adaptive hedging, the limit, the key bound, the clock), without hooks.
func (s Settings) EngineConfig() EngineConfig {
	return EngineConfig{
		BudgetRatio:   s.BudgetRatio,
		BudgetReserve: s.BudgetReserve,
		Breaker:       s.Breaker,
		Clock:         s.Clock,
		Adaptive:      s.AdaptiveHedging,
		Limit:         s.ConcurrencyLimit,
		MaxKeys:       s.MaxKeys,
	}
}

// Policy returns the per-call part of s.
func (s Settings) Policy() Policy {
	return Policy{
		MaxAttempts:       s.MaxAttempts,
		MaxHedges:         s.MaxHedges,
		HedgeDelay:        s.HedgeDelay,
		Adaptive:          s.AdaptiveHedging != nil,
		Backoff:           s.Backoff,
		PerAttemptTimeout: s.PerAttemptTimeout,
		MaxRetryAfter:     s.MaxRetryAfter,
	}
}

// checkSetting panics, naming option and the field, unless set yields
// valid settings from the defaults. Each option is checked alone, when it
// is called; since each sets its fields whole, the options NewRetrier
// applies in order then yield valid settings together.
func checkSetting(option string, set func(*Settings)) {
	s := DefaultSettings()
	set(&s)
	if err := s.Validate(); err != nil {
		panic("resilience: " + option + ": " + strings.TrimPrefix(err.Error(), "resilience: "))
	}
}
