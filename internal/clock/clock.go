// Package clock is the core packages' view of the public package
// github.com/MrVSiK/gotry/clock: the same Clock and Timer (aliases), and
// Seconds (coarse.go), the cheap current second the engine's bookkeeping
// reads.
package clock

import pub "github.com/MrVSiK/gotry/clock"

// Clock is the public clock.Clock.
type Clock = pub.Clock

// Timer is the public clock.Timer.
type Timer = pub.Timer

// Real returns the wall clock (the public clock.Real).
func Real() Clock { return pub.Real() }

// isReal reports whether c is the wall clock (what SecondsOf shares
// process-wide).
func isReal(c Clock) bool { return c == pub.Real() }
