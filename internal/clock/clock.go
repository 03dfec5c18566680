// Package clock is the time source of the core packages. Production code uses
// Real; tests inject fakeclock.Clock so timing logic is driven by hand instead
// of by sleeping.
package clock

import "time"

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends on C after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f on its own goroutine after d. The returned timer's C
	// is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the subset of *time.Timer the core uses.
type Timer interface {
	// C is the channel the timer fires on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the timer
	// had been active.
	Reset(d time.Duration) bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// isReal reports whether c is the real clock (what SecondsOf shares
// process-wide).
func isReal(c Clock) bool {
	_, ok := c.(realClock)
	return ok
}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
