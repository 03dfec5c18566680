package periodic

import "github.com/MrVSiK/gotry/internal/clock"

// WithClock runs a Periodic on c.
func WithClock(c clock.Clock) Option { return withClock(c) }

// WithRand pins a Periodic's jitter draws.
func WithRand(randN func(n int64) int64) Option { return withRandN(randN) }
