package periodic

// WithRand pins a Periodic's jitter draws.
func WithRand(randN func(n int64) int64) Option { return withRandN(randN) }
