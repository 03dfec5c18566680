// Package fakeclock is a manually driven clock.Clock for tests.
//
// Time stands still until Advance moves it; timers whose deadline is reached
// fire during Advance, in deadline order. WaitForTimers lets a test wait until
// the code under test has armed the timers it is expected to arm, so a test
// never has to sleep to synchronise with a goroutine.
package fakeclock

import (
	"sort"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Clock is a fake clock. The zero value is not usable; call New.
type Clock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	timers  []*timer // pending timers; guarded by mu
	created int      // timers ever armed (NewTimer, AfterFunc, Reset); guarded by mu
}

var _ clock.Clock = (*Clock)(nil)

// New returns a fake clock reading start.
func New(start time.Time) *Clock {
	c := &Clock{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a channel timer.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.arm(t, d)
	return t
}

// AfterFunc arms a timer that calls f on a new goroutine when it fires.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, fn: f}
	c.arm(t, d)
	return t
}

func (c *Clock) arm(t *timer, d time.Duration) {
	c.mu.Lock()
	t.when = c.now.Add(d)
	t.active = true
	c.timers = append(c.timers, t)
	c.created++
	c.cond.Broadcast()
	c.mu.Unlock()
	if d <= 0 {
		c.Advance(0)
	}
}

// Advance moves the clock forward by d, firing every timer that falls due.
// AfterFunc callbacks run on their own goroutines, as with the real clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*timer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.when.After(c.now) {
			t.active = false
			due = append(due, t)
			continue
		}
		keep = append(keep, t)
	}
	c.timers = keep
	now := c.now
	c.cond.Broadcast()
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].when.Before(due[j].when) })
	for _, t := range due {
		if t.fn != nil {
			go t.fn()
			continue
		}
		select {
		case t.ch <- now:
		default:
		}
	}
}

// Pending returns the number of armed timers.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are armed, or until timeout of
// real time passes; it reports whether the count was reached.
func (c *Clock) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		if !time.Now().Before(deadline) {
			return false
		}
		c.cond.Wait()
	}
	return true
}

// Armed returns how many timers have ever been armed; tests use it to wait
// for a new sleep to begin even when older timers are still pending.
func (c *Clock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created
}

// WaitForArmed blocks until at least n timers have ever been armed, or until
// timeout of real time passes; it reports whether the count was reached.
func (c *Clock) WaitForArmed(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.created < n {
		if !time.Now().Before(deadline) {
			return false
		}
		c.cond.Wait()
	}
	return true
}

type timer struct {
	c      *Clock
	ch     chan time.Time
	fn     func()
	when   time.Time // guarded by c.mu
	active bool      // guarded by c.mu
}

func (t *timer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer and, as with Go 1.23+ timers, discards a fired
// value not yet received.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	return t.removeLocked()
}

func (t *timer) drain() {
	if t.ch == nil {
		return
	}
	select {
	case <-t.ch:
	default:
	}
}

// removeLocked takes t off the pending list; requires t.c.mu held.
func (t *timer) removeLocked() bool {
	if !t.active {
		return false
	}
	t.active = false
	for i, p := range t.c.timers {
		if p == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	return true
}

func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	t.drain()
	was := t.removeLocked()
	t.when = t.c.now.Add(d)
	t.active = true
	t.c.timers = append(t.c.timers, t)
	t.c.created++
	t.c.cond.Broadcast()
	t.c.mu.Unlock()
	if d <= 0 {
		t.c.Advance(0)
	}
	return was
}
