package resilience

import (
	"fmt"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/option"
)

// Option configures a Retrier (NewRetrier) or package transport's
// Transport (transport.New): the options below set the fields of the
// Settings both share and are written once, here; package transport's
// options of the same names are these (transport.Option is Option), and
// its own (a classifier, body limits, ...) configure only a Transport.
// Options are applied in order; a later option overrides an earlier one,
// except WithHooks (and each package's WithHooksFor), which add. An
// option constructor checks its arguments when it is called and panics,
// naming itself and the field, on one that makes no sense.
//
// An option's argument says what it means in full, so it is not a
// Settings field: WithMaxAttempts(0) is nonsense rather than the
// default, and where an argument of 0 means none (WithRetryBudget,
// WithMaxRetryAfter) the option sets Off.
type Option interface {
	// Configure applies the option; option.Target is this module's own,
	// so that only this module makes options.
	Configure(t *option.Target[Settings, Hooks])
}

// settingOption sets fields of the shared Settings.
type settingOption func(*Settings)

func (f settingOption) Configure(t *option.Target[Settings, Hooks]) { f(t.Settings) }

// setting returns the option that applies set, after checking that set
// yields valid settings from the defaults: it panics otherwise, naming
// option and (through Validate) the field. Each option sets its fields
// whole, so options that pass one by one are valid together.
func setting(option string, set func(*Settings)) Option {
	s := DefaultSettings()
	set(&s)
	if err := s.Validate(); err != nil {
		panic("resilience: " + option + ": " + strings.TrimPrefix(err.Error(), "resilience: "))
	}
	return settingOption(set)
}

// argument panics, naming option and field, when an option's argument
// makes no sense although the field would take it (0 for a default).
func argument(ok bool, option, field string, v any, want string) {
	if !ok {
		panic(fmt.Sprintf("resilience: %s: Settings.%s must %s, got %v", option, field, want, v))
	}
}

// noneOff returns Off for 0: an argument of 0 that means none.
func noneOff[T int | float64 | time.Duration](v T) T {
	if v == 0 {
		return Off
	}
	return v
}

// WithMaxAttempts sets the attempt limit, retries and hedges together
// (Settings.MaxAttempts; default DefaultMaxAttempts). 1 disables retries
// and hedging. It panics if n < 1.
func WithMaxAttempts(n int) Option {
	argument(n >= 1, "WithMaxAttempts", "MaxAttempts", n, "be at least 1")
	return setting("WithMaxAttempts", func(s *Settings) { s.MaxAttempts = n })
}

// WithBackoff sets the delay between retries when nothing else is in
// flight (Settings.Backoff; default DefaultBackoff). It panics on nil;
// Constant(0) retries without waiting.
func WithBackoff(b Backoff) Option {
	argument(b != nil, "WithBackoff", "Backoff", b, "not be nil (use Constant(0) for no delay)")
	return setting("WithBackoff", func(s *Settings) { s.Backoff = b })
}

// WithPerAttemptTimeout bounds each attempt separately from the caller's
// deadline (Settings.PerAttemptTimeout; default none); a timed-out attempt
// is retried. It panics if d < 0.
func WithPerAttemptTimeout(d time.Duration) Option {
	return setting("WithPerAttemptTimeout", func(s *Settings) { s.PerAttemptTimeout = d })
}

// WithHedging launches another attempt when delay passes without a
// result, up to maxHedges extra in flight (Settings.HedgeDelay and
// MaxHedges; default off). Hedging is on when both are positive; zero
// turns it off, adaptive hedging too. It panics on negatives.
func WithHedging(delay time.Duration, maxHedges int) Option {
	return setting("WithHedging", func(s *Settings) {
		s.HedgeDelay, s.MaxHedges, s.AdaptiveHedging = delay, maxHedges, nil
	})
}

// WithAdaptiveHedging hedges each call after a delay learned from its
// key's recent latencies (per host, for the transport), with at most
// maxHedges extra attempts in flight and hedges held within
// cfg.MaxExtraLoad of the calls (Settings.AdaptiveHedging; see
// AdaptiveHedging for the model, the cold start and the bounds; its zero
// value is its defaults). A later WithHedging turns it off. It panics,
// naming the field, when cfg makes no sense or maxHedges < 1.
func WithAdaptiveHedging(cfg AdaptiveHedging, maxHedges int) Option {
	argument(maxHedges >= 1, "WithAdaptiveHedging", "MaxHedges", maxHedges, "be at least 1 with AdaptiveHedging")
	return setting("WithAdaptiveHedging", func(s *Settings) {
		s.AdaptiveHedging, s.HedgeDelay, s.MaxHedges = &cfg, 0, maxHedges
	})
}

// WithMaxRetryAfter sets the longest server-dictated delay waited for
// (Settings.MaxRetryAfter; default DefaultMaxRetryAfter): for the
// transport a Retry-After, for a Retrier an error's RetryAfter method
// (see Retry). A longer one ends the call with that result. 0 honours
// only a zero delay. It panics if d < 0.
func WithMaxRetryAfter(d time.Duration) Option {
	argument(d >= 0, "WithMaxRetryAfter", "MaxRetryAfter", d, "not be negative")
	return setting("WithMaxRetryAfter", func(s *Settings) { s.MaxRetryAfter = noneOff(d) })
}

// WithRetryBudget sets the retry budget (Settings.BudgetRatio and
// BudgetReserve, which describe it; default DefaultBudgetRatio and
// DefaultBudgetReserve): a retry or hedge pays a token and gets it back if
// it succeeds; each successful call deposits ratio tokens that expire
// after 10s; a reserve of reserve retries, refilled by successes (one a
// second at most), pays first and lets a quiet client absorb a failure.
// A busy client's retries that fix independent failures are all paid up
// to 20% of attempts failing, and all but a few in a thousand at 30%;
// during an outage, where retries fail, the reserve is
// spent once, not every second. A 0 argument means none:
// WithRetryBudget(0, 0) disables the budget. It panics on a negative, NaN
// or infinite ratio or a reserve outside 0..1000.
func WithRetryBudget(ratio float64, reserve int) Option {
	argument(!(ratio < 0), "WithRetryBudget", "BudgetRatio", ratio, "be finite and not negative")
	argument(reserve >= 0, "WithRetryBudget", "BudgetReserve", reserve, fmt.Sprintf("be between 0 and %d", maxReserve))
	return setting("WithRetryBudget", func(s *Settings) { s.BudgetRatio, s.BudgetReserve = noneOff(ratio), noneOff(reserve) })
}

// WithBreaker turns on a circuit breaker per call key (Settings.Breaker;
// default off). Zero fields of cfg take their defaults; it panics on
// negative fields.
func WithBreaker(cfg BreakerConfig) Option {
	return setting("WithBreaker", func(s *Settings) { s.Breaker = &cfg })
}

// WithConcurrencyLimit turns on an adaptive concurrency limit per call key
// (Settings.ConcurrencyLimit; default off; see ConcurrencyLimit): a call
// over it waits briefly, then fails at once with an error matching
// ErrOverloaded without running its attempt; retries and hedges need a
// permit too. For a Retrier, what teaches the limit congestion is its
// per-attempt timeouts (WithPerAttemptTimeout) and the latency of its
// function's results. Zero fields of cfg take their defaults; it panics,
// naming the field, on nonsense.
func WithConcurrencyLimit(cfg ConcurrencyLimit) Option {
	return setting("WithConcurrencyLimit", func(s *Settings) { s.ConcurrencyLimit = &cfg })
}

// WithMaxKeys bounds how many call keys (hosts, for the transport) the
// breakers, adaptive hedging and the concurrency limit track, together
// (Settings.MaxKeys; default DefaultMaxKeys). A new key evicts exactly
// one: idle keys first, least recently used first; a key with calls in
// flight under its concurrency limit, or whose breaker is open, is kept
// (until they end, or its OpenDuration does), and while every tracked key
// is such a one a new key is served untracked (see Stats). It panics when
// n < 1.
func WithMaxKeys(n int) Option {
	argument(n >= 1, "WithMaxKeys", "MaxKeys", n, "be at least 1")
	return setting("WithMaxKeys", func(s *Settings) { s.MaxKeys = n })
}

// WithClock runs everything on c: backoff sleeps, hedge timers, attempt
// timeouts, breaker and budget windows (Settings.Clock; default the wall
// clock; nil is ignored). A test passes a clock.Fake and moves it on
// instead of sleeping (see the clock package's example).
func WithClock(c clock.Clock) Option {
	return settingOption(func(s *Settings) {
		if c != nil {
			s.Clock = c
		}
	})
}

// WithHooks adds hooks. Several WithHooks (and WithHooksFor) options
// combine: each hook set sees every event, in the order the options were
// given.
func WithHooks(h Hooks) Option { return hooksOption(h) }

type hooksOption Hooks

func (h hooksOption) Configure(t *option.Target[Settings, Hooks]) { t.AddHooks(Hooks(h)) }
