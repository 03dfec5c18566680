package resilience

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/MrVSiK/gotry/internal/jitter"
)

// Backoff computes the delay before a retry. retry is 1 for the first retry,
// 2 for the second and so on; prev is the delay returned for the previous
// retry (0 before the first). Implementations must be safe for concurrent use
// and should never return a negative delay (the engine treats one as 0).
type Backoff interface {
	Delay(retry int, prev time.Duration) time.Duration
}

// BackoffFunc adapts a plain function to Backoff.
type BackoffFunc func(retry int, prev time.Duration) time.Duration

// Delay calls f.
func (f BackoffFunc) Delay(retry int, prev time.Duration) time.Duration { return f(retry, prev) }

// checkDelays panics when a strategy is built with a negative duration or a
// cap below its base; the message names the constructor and the value.
func checkDelays(name string, base, max time.Duration) {
	switch {
	case base < 0:
		panic(fmt.Sprintf("resilience: %s: base must not be negative, got %v", name, base))
	case max < 0:
		panic(fmt.Sprintf("resilience: %s: max must not be negative, got %v", name, max))
	case max < base:
		panic(fmt.Sprintf("resilience: %s: max %v is below base %v", name, max, base))
	}
}

// Constant waits d before every retry. It panics if d is negative.
func Constant(d time.Duration) Backoff {
	if d < 0 {
		panic(fmt.Sprintf("resilience: Constant: delay must not be negative, got %v", d))
	}
	return constant(d)
}

type constant time.Duration

func (c constant) Delay(int, time.Duration) time.Duration { return time.Duration(c) }

// Exponential waits base·2^(retry−1), capped at max, with no jitter. It panics
// if base or max is negative or max < base.
func Exponential(base, max time.Duration) Backoff {
	checkDelays("Exponential", base, max)
	return exponential{base: base, max: max}
}

type exponential struct{ base, max time.Duration }

func (e exponential) Delay(retry int, _ time.Duration) time.Duration {
	return expCapped(e.base, e.max, retry)
}

// expCapped returns base·2^(retry−1) capped at max without overflowing: the
// shift is only taken when it provably fits below max.
func expCapped(base, max time.Duration, retry int) time.Duration {
	if retry < 1 {
		retry = 1
	}
	if base <= 0 {
		return 0
	}
	shift := retry - 1
	if shift >= 63 || base > max>>uint(shift) {
		return max
	}
	return base << uint(shift)
}

// ExponentialJitter is "full jitter": a uniform random delay in
// [0, base·2^(retry−1)], the exponential part capped at max. It spreads
// clients that fail together furthest apart. It panics like Exponential.
func ExponentialJitter(base, max time.Duration) Backoff {
	checkDelays("ExponentialJitter", base, max)
	return fullJitter{base: base, max: max}
}

type fullJitter struct{ base, max time.Duration }

func (f fullJitter) Delay(retry int, _ time.Duration) time.Duration {
	return jitter.Full(expCapped(f.base, f.max, retry), rand.Int64N)
}

// EqualJitter keeps half of the exponential delay and randomises the other
// half: a uniform delay in [d/2, d] with d = base·2^(retry−1) capped at max.
// It panics like Exponential.
func EqualJitter(base, max time.Duration) Backoff {
	checkDelays("EqualJitter", base, max)
	return equalJitter{base: base, max: max}
}

type equalJitter struct{ base, max time.Duration }

func (e equalJitter) Delay(retry int, _ time.Duration) time.Duration {
	return jitter.Equal(expCapped(e.base, e.max, retry), rand.Int64N)
}

// DecorrelatedJitter picks min(max, uniform[base, 3·prev]), treating prev
// below base as base, so each delay grows from the previous one rather than
// from the retry number. It panics like Exponential.
func DecorrelatedJitter(base, max time.Duration) Backoff {
	checkDelays("DecorrelatedJitter", base, max)
	return decorrelated{base: base, max: max}
}

type decorrelated struct{ base, max time.Duration }

func (d decorrelated) Delay(_ int, prev time.Duration) time.Duration {
	if prev < d.base {
		prev = d.base
	}
	hi := time.Duration(math.MaxInt64)
	if prev <= math.MaxInt64/3 {
		hi = 3 * prev
	}
	return min(d.max, jitter.Uniform(d.base, hi, rand.Int64N))
}

// isNil reports whether b is nil or a nil BackoffFunc, either of which
// would crash at the first retry.
func isNil(b Backoff) bool {
	if b == nil {
		return true
	}
	f, ok := b.(BackoffFunc)
	return ok && f == nil
}

// clampDelay turns whatever a user Backoff returned into a usable delay.
func clampDelay(d time.Duration) time.Duration { return max(d, 0) }

// DefaultBackoff is the backoff when none is set: full jitter from 100ms
// (the order of a loopback-to-region round trip, so a first retry does
// not pile onto a failure still in progress), capped at 5s (past which a
// caller's deadline usually ends first).
func DefaultBackoff() Backoff { return ExponentialJitter(100*time.Millisecond, 5*time.Second) }
