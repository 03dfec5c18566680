// Package clock is the time source that gotry's packages take through their
// WithClock options: Real, the wall clock, by default, and Fake, a clock a
// test moves by hand, so that code retrying, hedging or timing out through
// gotry is tested without sleeping.
//
// A Fake drives the same code the wall clock does: gotry reads the time and
// arms its timers (backoff sleeps, hedge delays, per-attempt timeouts,
// breaker and budget windows) through the Clock it is given, and does
// nothing differently on a fake one, with one exception: the current
// second, which gotry's bookkeeping reads on the wall clock from a word a
// timer refreshes, it reads from a Fake directly, so that it moves exactly
// when Advance returns and no timer of gotry's own shows among the Fake's.
package clock

import "time"

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on C after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f on its own goroutine after d. The returned timer's
	// C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is what a Clock's timers do: the part of *time.Timer gotry uses.
type Timer interface {
	// C is the channel the timer fires on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// it (false: it had fired or been stopped). As with Go 1.23+ timers, a
	// value not yet received from C is discarded.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the
	// timer had been active.
	Reset(d time.Duration) bool
}

// Real returns the wall clock: time.Now and the runtime's timers.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
