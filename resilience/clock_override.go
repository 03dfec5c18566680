package resilience

import "github.com/MrVSiK/gotry/internal/clock"

// clockOverride carries an injected clock through options; only tests set it.
type clockOverride struct{ clock clock.Clock }

// withRetrierClock injects a clock into a Retrier; tests only.
func withRetrierClock(c clock.Clock) RetrierOption {
	return func(rc *retrierConfig) { rc.clock.clock = c }
}
