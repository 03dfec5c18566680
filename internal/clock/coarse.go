package clock

import (
	"sync/atomic"
	"time"
)

// A clock read costs tens of nanoseconds on a virtual machine (≈ 60 ns for
// time.Now on the KVM guests we measure on), more than everything else a
// successful call through the engine does. What reads the time on every call
// only to find its second (the retry budget's deposit) reads a Seconds clock
// instead: an atomic load of the current Unix second, which a timer refreshes
// at each second boundary while the clock is in use.

// Seconds tells the current Unix second cheaply. Its reading may lag the true
// second by the refreshing timer's delay (normally well under a millisecond;
// more on a starved machine), never lead it. A Seconds that nobody reads for
// a whole second stops its timer and holds nothing; the next read restarts
// it. Safe for concurrent use.
type Seconds struct {
	c       Clock
	direct  bool         // read c on every call (see SecondsOf)
	sec     atomic.Int64 // the Unix second of the last refresh
	ticking atomic.Bool  // a refresh is scheduled (sec is current)
	used    atomic.Bool  // read since the last refresh
	timer   atomic.Value // Timer; set once, on the first start
}

// NewSeconds returns a Seconds clock on c.
func NewSeconds(c Clock) *Seconds { return &Seconds{c: c} }

var realSeconds = NewSeconds(Real())

// SecondsOf returns a Seconds clock for c: for the real clock, one shared by
// the whole process; for any other (a fake clock in a test), one that reads c
// on every call, so the test's timers are only its own and time moves
// exactly when the test moves it.
//
// A fake clock does not drive the refreshing timer, for two reasons that
// both break tests. A fake clock runs an AfterFunc callback on a goroutine
// of its own after Advance returns, so a refreshed second would lag
// Advance by a goroutine's scheduling: a test that moves the clock past a
// budget's window and calls at once would see the old second or the new
// one by chance, and could only wait in real time for the refresh (as this
// package's own tests of the refresh do). And the refresh timer would be
// one of the clock's timers, which tests, users' included, count
// (Pending, Armed, WaitForTimers) to know that the code under test has
// reached a backoff sleep or armed a hedge: the first call of every engine
// would arm it, and each second Advance crossed would re-arm it. (With a
// ticking Seconds on every fake clock, 17 tests of resilience and transport
// failed and telemetry's hung.) The refresh itself is tested on a fake
// clock in coarse_test.go, and the engine's use of a Seconds is the same
// code either way (Read, Coarse).
//
// Inside a testing/synctest bubble the real clock is the bubble's fake
// one, and the shared Seconds must not be used there: its second is the
// wall clock's while the bubble's time moves, and its refresh timer must
// not be made or reset in a bubble (made in one, it is reset outside it
// later, which is a fatal error of the runtime; reset in one, it is
// scheduled for the bubble's time on the real clock's heap and never
// fires, freezing the process's second). So in a bubble SecondsOf returns
// a Seconds that reads the (bubble's) clock on every call, as for a fake
// clock, and the shared one never arms its timer from a bubble (start).
func SecondsOf(c Clock) *Seconds {
	if isReal(c) && !inBubble(c.Now()) {
		return realSeconds
	}
	return &Seconds{c: c, direct: true}
}

// inBubble reports whether now, read from the real clock, was read inside
// a testing/synctest bubble. Outside a bubble the runtime gives every
// time.Now a monotonic reading; inside one, time is the bubble's and
// carries none. Round(0) strips a monotonic reading and == compares it, as
// the time package documents. (On a platform without a monotonic clock
// every read would look like a bubble's: the engine would then read the
// clock on every call, correct and a little slower.)
func inBubble(now time.Time) bool {
	return now == now.Round(0) //nolint:staticcheck // == compares the monotonic reading, which is the point (Equal ignores it)
}

// Unix returns the current Unix second (see Seconds for how current).
func (s *Seconds) Unix() int64 {
	if sec, ok := s.Coarse(); ok {
		return sec
	}
	sec, _, _ := s.Read()
	return sec
}

// Read returns the current Unix second (see Seconds for how current) and,
// when finding it took a read of the clock (a Seconds that reads on every
// call, or one whose refresh had stopped), the exact time that read: a
// caller that wants the exact time too need not read it again.
func (s *Seconds) Read() (sec int64, now time.Time, exact bool) {
	if sec, ok := s.Coarse(); ok {
		return sec, time.Time{}, false
	}
	if s.ticking.Load() { // (never, for one that reads on every call)
		// A store only once a second: readers on many cores share the line.
		s.used.Store(true)
		return s.sec.Load(), time.Time{}, false
	}
	if s.direct {
		now = s.c.Now()
		return now.Unix(), now, true
	}
	now = s.start()
	return now.Unix(), now, true
}

// Coarse is Read's common path, small enough to inline: the current second
// when it is being refreshed and was read already in this second, or false
// (then call Read).
func (s *Seconds) Coarse() (int64, bool) {
	if s.ticking.Load() && s.used.Load() {
		return s.sec.Load(), true
	}
	return 0, false
}

// Now reads the exact time from the clock s is on.
func (s *Seconds) Now() time.Time { return s.c.Now() }

// Clock returns the clock s is on (for the real clock, the real one).
func (s *Seconds) Clock() Clock { return s.c }

// Ticking reports whether the refresh timer is scheduled (for tests).
func (s *Seconds) Ticking() bool { return s.ticking.Load() }

// start reads the clock, publishes its second and, unless another reader
// beat it to it, schedules the refreshes. It returns the time it read.
func (s *Seconds) start() time.Time {
	now := s.c.Now()
	if isReal(s.c) && inBubble(now) {
		// The shared Seconds read from a bubble (by an engine made
		// outside it): answer from the clock, and neither publish the
		// bubble's second nor touch the timer (see SecondsOf).
		return now
	}
	s.sec.Store(now.Unix())
	if s.ticking.CompareAndSwap(false, true) {
		s.used.Store(true)
		s.arm(now)
	}
	return now
}

// arm schedules the next refresh just after the second that follows now.
// Only one goroutine arms at a time: start after winning the CompareAndSwap
// (the timer is then idle), or the refresh itself.
func (s *Seconds) arm(now time.Time) {
	d := time.Second - time.Duration(now.Nanosecond())
	if t, ok := s.timer.Load().(Timer); ok {
		t.Reset(d)
		return
	}
	s.timer.Store(s.c.AfterFunc(d, s.refresh))
}

// refresh runs on the timer: it publishes the new second, and keeps ticking
// only if someone read the clock during the second that ended.
func (s *Seconds) refresh() {
	now := s.c.Now()
	s.sec.Store(now.Unix())
	if s.used.Swap(false) {
		s.arm(now)
		return
	}
	// Nobody is reading: stop. A reader that still saw ticking got the
	// second just stored; the next one restarts the timer.
	s.ticking.Store(false)
}
