package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/jitter"
	"github.com/MrVSiK/gotry/internal/kiterr"
	"github.com/MrVSiK/gotry/resilience"
)

// JitterStrategy selects how a Schedule randomises the delays it computes.
// The zero value is JitterAdditive.
type JitterStrategy int

// Jitter strategies. Each is applied to the capped exponential delay d.
const (
	// JitterAdditive adds a uniform random amount in [0, Jitter] to d, then
	// caps the sum at MaxDelay. The spread is fixed, so its share of the
	// delay shrinks as the delay grows, and it is absorbed entirely once d
	// sits at MaxDelay. This is the default.
	JitterAdditive JitterStrategy = iota
	// JitterFull replaces d with a uniform random delay in [0, d]. Because
	// the spread grows with the delay, it pulls clients that fail together
	// apart the furthest. Jitter is ignored.
	JitterFull
	// JitterEqual keeps half of d and randomises the rest: a uniform delay
	// in [d/2, d]. Less spread than JitterFull, but a floor under how soon
	// the next try comes. Jitter is ignored.
	JitterEqual
)

// String returns "additive", "full" or "equal".
func (s JitterStrategy) String() string {
	switch s {
	case JitterAdditive:
		return "additive"
	case JitterFull:
		return "full"
	case JitterEqual:
		return "equal"
	}
	return fmt.Sprintf("JitterStrategy(%d)", int(s))
}

// defaultFactor is the growth factor of a Config whose Factor is zero.
const defaultFactor = 2

// Config configures a Schedule. Its zero value is valid and describes a
// schedule that always returns 0.
type Config struct {
	// Base is the first delay, before jitter. It must not be negative; 0
	// makes every delay 0 before jitter.
	Base time.Duration
	// Factor multiplies the delay at every step: the n-th delay is
	// Base·Factor^(n−1) before the cap. Zero means 2. Otherwise it must be a
	// finite number ≥ 1 (1 gives a constant delay); NaN, infinities and
	// values below 1 are rejected. Very large finite factors are fine: the
	// delay simply reaches MaxDelay at the second step.
	Factor float64
	// Jitter is the largest random amount JitterAdditive adds (inclusive);
	// the other strategies ignore it. It must not be negative; 0 means no jitter.
	Jitter time.Duration
	// MaxDelay caps every delay, jitter included. It must not be negative
	// and, when set, must not be below Base. Zero means no cap other than
	// the largest time.Duration.
	MaxDelay time.Duration
	// Strategy selects the jitter strategy; the zero value is
	// JitterAdditive.
	Strategy JitterStrategy

	// randN draws a uniform integer in [0, n) for n > 0; nil means
	// math/rand/v2. Tests set it (export_test.go) to pin the random draws.
	randN func(n int64) int64
}

// ConfigError is the error New returns for an invalid Config: Config is
// "schedule.Config", Option the field's name and Reason what is wrong with
// it. Find it with errors.As. The type is shared with the other kit packages
// (periodic.ConfigError, cache.ConfigError, dnscache.ConfigError are the same
// type). Only the kit's New functions return it; the constructors of package
// resilience that validate their arguments (NewEngine, the Backoff
// constructors, the Retrier's Option constructors) panic instead,
// with a message naming the argument, field or option.
type ConfigError = kiterr.ConfigError

// Schedule is a backoff delay calculator. It never sleeps, starts no
// goroutines and does no I/O: it only says how long to wait, and the caller
// owns the loop and the timer.
//
// Next walks the progression Base, Base·Factor, Base·Factor², ... capped at
// MaxDelay, applying the jitter strategy to each value. Delay computes the
// same values from the retry number alone, which makes a *Schedule a
// resilience.Backoff for the attempt engine.
//
// The progression is computed in floating point and clamped before it is
// converted back to a time.Duration, so no factor and no number of steps can
// overflow it into a negative delay or push it past MaxDelay; the jitter
// addition saturates the same way. (A delay that is doubled in integer
// arithmetic wraps negative after about 63 steps, and a sleep of a negative
// duration returns at once: a retry loop would spin at full speed exactly
// when it should be waiting longest.)
//
// A Schedule is safe for concurrent use: Next and Reset share a small mutex,
// and Delay touches no state at all. Concurrent callers of Next advance one
// shared progression, though, so independent retry loops should each have
// their own Schedule, or use Delay. Next and Delay cost one math.Pow and, with
// jitter, one random draw; neither allocates.
//
// The zero Schedule returns 0 from every method; build one with New.
type Schedule struct {
	base     time.Duration
	factor   float64
	jitter   time.Duration
	cap      time.Duration // MaxDelay, or math.MaxInt64 when MaxDelay is 0
	strategy JitterStrategy
	randN    func(n int64) int64

	mu   sync.Mutex    // guards the progression below
	n    int           // number of Next calls since the last Reset (saturating)
	last time.Duration // the previous delay before jitter; 0 after Reset
}

var _ resilience.Backoff = (*Schedule)(nil)

// New validates cfg and returns a Schedule positioned before its first delay.
// An invalid field yields a *ConfigError naming it.
func New(cfg Config) (*Schedule, error) {
	const name = "schedule.Config"
	factor := cfg.Factor
	if factor == 0 {
		factor = defaultFactor
	}
	switch {
	case cfg.Base < 0:
		return nil, kiterr.Configf(name, "Base", "must not be negative, got %v", cfg.Base)
	case math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 1:
		return nil, kiterr.Configf(name, "Factor", "must be a finite number >= 1 (or 0 for the default), got %v", cfg.Factor)
	case cfg.Jitter < 0:
		return nil, kiterr.Configf(name, "Jitter", "must not be negative, got %v", cfg.Jitter)
	case cfg.MaxDelay < 0:
		return nil, kiterr.Configf(name, "MaxDelay", "must not be negative, got %v", cfg.MaxDelay)
	case cfg.MaxDelay > 0 && cfg.MaxDelay < cfg.Base:
		return nil, kiterr.Configf(name, "MaxDelay", "%v is below Base %v", cfg.MaxDelay, cfg.Base)
	case cfg.Strategy < JitterAdditive || cfg.Strategy > JitterEqual:
		return nil, kiterr.Configf(name, "Strategy", "is not a known JitterStrategy, got %d", int(cfg.Strategy))
	}
	s := &Schedule{
		base:     cfg.Base,
		factor:   factor,
		jitter:   cfg.Jitter,
		cap:      cfg.MaxDelay,
		strategy: cfg.Strategy,
		randN:    cfg.randN,
	}
	if s.cap == 0 {
		s.cap = math.MaxInt64
	}
	if s.randN == nil {
		s.randN = rand.Int64N
	}
	return s, nil
}

// Next returns the next delay of the progression, jitter applied, and
// advances the progression. The first call after New or Reset returns
// Base (jittered). Before jitter the delays never decrease, and every result
// lies in [0, MaxDelay].
func (s *Schedule) Next() time.Duration {
	s.mu.Lock()
	d := s.last
	if d < s.cap || s.n == 0 {
		// Not saturated yet: compute the next step. Taking the maximum with
		// the previous value keeps the progression monotone even where
		// float64 rounding (bases above 2^53, factors a hair above 1) would
		// otherwise let a step come out a nanosecond short.
		if s.n < math.MaxInt {
			s.n++
		}
		d = max(d, s.delayAt(s.n))
		s.last = d
	}
	s.mu.Unlock()
	return s.applyJitter(d)
}

// Reset rewinds the progression, so the next call to Next returns Base again.
// Call it after a success.
func (s *Schedule) Reset() {
	s.mu.Lock()
	s.n, s.last = 0, 0
	s.mu.Unlock()
}

// Delay implements resilience.Backoff. It returns the delay before retry
// number retry (1 for the first retry; smaller values count as 1): Base·Factor^(retry−1)
// capped at MaxDelay, with the jitter strategy applied. prev is ignored.
//
// Delay is computed from retry alone. It neither reads nor advances the
// progression behind Next, so one Schedule can serve any number of
// concurrent calls as their Backoff. Before jitter, Delay(n) equals the n-th
// delay Next returns after a Reset, up to floating-point rounding.
func (s *Schedule) Delay(retry int, _ time.Duration) time.Duration {
	return s.applyJitter(s.delayAt(max(retry, 1)))
}

// delayAt returns Base·Factor^(n−1) clamped to [Base, cap], for n ≥ 1.
func (s *Schedule) delayAt(n int) time.Duration {
	if n <= 1 || s.base == 0 || s.factor == 1 {
		return s.base
	}
	f := float64(s.base) * math.Pow(s.factor, float64(n-1))
	// The negated comparison also catches +Inf. It must come before the
	// conversion: converting a float64 at or above 2^63 to an integer is
	// not defined by the language and yields a negative number on amd64.
	if !(f < float64(s.cap)) {
		return s.cap
	}
	return max(time.Duration(f), s.base)
}

// applyJitter randomises d (already within [0, cap]) by the strategy.
func (s *Schedule) applyJitter(d time.Duration) time.Duration {
	if s.randN == nil { // the zero Schedule
		return d
	}
	switch s.strategy {
	case JitterFull:
		return jitter.Full(d, s.randN)
	case JitterEqual:
		return jitter.Equal(d, s.randN)
	}
	return min(jitter.Add(d, s.jitter, s.randN), s.cap)
}

// AddJitter returns d plus a uniform random amount in [0, j]. It is the
// jitter step of a Schedule on its own, for work paced at a fixed interval
// rather than backing off. A negative d counts as 0, a j ≤ 0 adds nothing,
// and the sum saturates at the largest time.Duration instead of wrapping
// negative. Safe for concurrent use; it does not allocate.
func AddJitter(d, j time.Duration) time.Duration {
	return jitter.Add(d, j, rand.Int64N)
}
