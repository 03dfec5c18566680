package transport

import "github.com/MrVSiK/gotry/internal/clock"

// WithClock injects a clock; for tests in package transport_test.
func WithClock(c clock.Clock) Option { return withClock(c) }
