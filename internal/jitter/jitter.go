// Package jitter is the one implementation of randomised delays in gotry.
// The backoffs of package resilience and the kit packages under resilience/
// (schedule, periodic) all draw through it, so every jittered delay in the
// module has the same bounds.
//
// Bounds: every range is closed, so a draw may land on either end. Uniform
// draws from [lo, hi], Full from [0, d], Equal from [d/2, d] (d/2 rounded
// down), and Add returns d plus an amount in [0, j]. The one exception
// is a range exactly as wide as the largest time.Duration, whose top value
// cannot be drawn (a random source over n values takes n ≤ math.MaxInt64).
//
// The random source is a parameter, randN, which must return a uniform
// integer in [0, n) for n > 0, as math/rand/v2's Int64N does; tests pass a
// function that pins the draws. No function here allocates, overflows or
// returns a negative duration for non-negative arguments.
package jitter

import (
	"math"
	"time"
)

// Uniform returns a random duration in [lo, hi]. It requires 0 ≤ lo; when
// hi ≤ lo it returns lo.
func Uniform(lo, hi time.Duration, randN func(n int64) int64) time.Duration {
	if hi <= lo {
		return lo
	}
	span := int64(hi - lo)
	if span == math.MaxInt64 {
		// span+1 would overflow: draw from [lo, hi) instead.
		return lo + time.Duration(randN(span))
	}
	return lo + time.Duration(randN(span+1))
}

// Full is "full jitter": a random duration in [0, d]. A negative d counts as
// 0.
func Full(d time.Duration, randN func(n int64) int64) time.Duration {
	return Uniform(0, max(d, 0), randN)
}

// Equal is "equal jitter": it keeps half of d (rounded down) and randomises
// the rest, a random duration in [d/2, d]. A negative d counts as 0.
func Equal(d time.Duration, randN func(n int64) int64) time.Duration {
	d = max(d, 0)
	half := d / 2
	return half + Uniform(0, d-half, randN)
}

// Add returns d plus a random amount in [0, j]. A negative d counts as 0, a
// j ≤ 0 adds nothing, and the sum saturates at the largest time.Duration
// instead of wrapping negative.
func Add(d, j time.Duration, randN func(n int64) int64) time.Duration {
	d = max(d, 0)
	if j <= 0 {
		return d
	}
	r := Uniform(0, j, randN)
	if r > math.MaxInt64-d {
		return math.MaxInt64
	}
	return d + r
}
