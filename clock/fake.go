package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a clock that stands still until Advance moves it. Timers whose
// deadline is reached fire during Advance, in deadline order (AfterFunc
// callbacks on goroutines of their own, as on the wall clock). A test
// starts the code under test on a goroutine, waits until it has armed the
// timers it is expected to arm (WaitForTimers, WaitForArmed), and moves the
// time on: it never sleeps to synchronise with that goroutine. Safe for
// concurrent use. The zero value is not usable; call NewFake.
type Fake struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	timers  []*timer // pending timers; guarded by mu
	created int      // timers ever armed (NewTimer, AfterFunc, Reset); guarded by mu
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	c := &Fake{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a channel timer.
func (c *Fake) NewTimer(d time.Duration) Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.arm(t, d)
	return t
}

// AfterFunc arms a timer that calls f on a new goroutine when it fires.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	t := &timer{c: c, fn: f}
	c.arm(t, d)
	return t
}

func (c *Fake) arm(t *timer, d time.Duration) {
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
func (c *Fake) Advance(d time.Duration) {
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
	sort.SliceStable(due, func(i, j int) bool { return due[i].when.Before(due[j].when) })
	// Channel timers receive their value before the lock is released, as
	// Go's timers do under their own lock: a Stop or Reset that follows
	// finds the value buffered, discards it and reports the timer stopped,
	// so no value of a stopped timer arrives afterwards. (The channel has
	// room for one value, so the send never blocks.)
	for _, t := range due {
		if t.fn == nil {
			select {
			case t.ch <- now:
			default:
			}
		}
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, t := range due {
		if t.fn != nil {
			go t.fn()
		}
	}
}

// Pending returns the number of armed timers.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are armed, or until timeout of
// real time passes; it reports whether the count was reached.
func (c *Fake) WaitForTimers(n int, timeout time.Duration) bool {
	return c.waitUntil(func() bool { return len(c.timers) >= n }, timeout)
}

// Armed returns how many timers have ever been armed; tests use it to wait
// for a new sleep to begin even when older timers are still pending.
func (c *Fake) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created
}

// WaitForArmed blocks until at least n timers have ever been armed, or until
// timeout of real time passes; it reports whether the count was reached.
func (c *Fake) WaitForArmed(n int, timeout time.Duration) bool {
	return c.waitUntil(func() bool { return c.created >= n }, timeout)
}

// waitUntil blocks until ok (called with c.mu held) holds, or until timeout
// of real time passes; it reports whether ok held.
func (c *Fake) waitUntil(ok func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !ok() {
		if !time.Now().Before(deadline) {
			return false
		}
		c.cond.Wait()
	}
	return true
}

type timer struct {
	c      *Fake
	ch     chan time.Time
	fn     func()
	when   time.Time // guarded by c.mu
	active bool      // guarded by c.mu
}

func (t *timer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer and, as with Go 1.23+ timers, discards a fired
// value not yet received. It reports whether the timer was stopped before
// its value was received (or, for AfterFunc, before its function started),
// as Go's Stop does: a value discarded here counts as stopped in time.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	drained := t.drain()
	return t.removeLocked() || drained
}

// drain discards a value the timer's channel holds, reporting whether it
// held one. Requires t.c.mu held (Advance sends under it).
func (t *timer) drain() bool {
	if t.ch == nil {
		return false
	}
	select {
	case <-t.ch:
		return true
	default:
		return false
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
	drained := t.drain()
	was := t.removeLocked() || drained
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
