package clock

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Arming and stopping a runtime timer costs ≈ 90 ns (two trips through the
// runtime's timer locks), and a call with hedging armed and a per-attempt
// timeout did it twice, for timers that almost never fire. A Queue keeps such
// timers in lists ordered by deadline, one runtime timer per list armed for
// the earliest: arming one is a clock read and an append, stopping one an
// unlink, and the runtime timer is touched only when the list's earliest
// deadline passes. Timers of one duration are armed in deadline order, so
// each append lands at the tail.

// Queues holds timers (Entries) and fires each at its deadline, on a
// goroutine of its own, as time.AfterFunc would. It keeps lists for up to
// len(slots) durations, each in a slot near the one its hash picks; an
// Entry whose duration finds no slot (many durations in use: adaptive hedge
// delays, say) is a runtime timer of its own instead, so a list only ever
// holds one duration and every insertion lands at its tail. Safe for
// concurrent use.
// On any clock but the real one (a fake clock in a test) every Entry is a
// timer of that clock, so a test sees, counts and fires them one by one.
type Queues struct {
	c      Clock
	direct bool // every Entry is a timer of c (see QueuesOf)
	real   bool // c is the real clock
	epoch  time.Time
	slots  [32]atomic.Pointer[queue]
	next   atomic.Uint32 // hands out Entry.home, round robin
}

// queue is the list(s) of one duration, sharded by processor.
type queue struct {
	d      time.Duration
	shards []qshard
}

// qshard is one list, with its runtime timer.
type qshard struct {
	qs         *Queues
	mu         sync.Mutex
	head, tail *Entry
	t          Timer // fires at `at`; made by the first arm
	at         int64 // the deadline t is armed for; 0 when disarmed
	_          [64]byte
}

// Entry is one timer of a Queues. Set F before the first Arm and leave it.
// An Entry is armed again only after Stop reported true or F ran: when Stop
// reports false, F may still be about to run.
type Entry struct {
	F func()

	prev, next *Entry
	when       int64
	shard      *qshard
	home       uint32 // picks the Entry's list among its duration's (0: not yet given)
	queued     bool
	direct     bool  // armed as t, a timer of its own
	t          Timer // made by the first Arm as a timer of its own
}

// NewQueues returns a Queues that keeps its timers in lists on c, whatever
// c is (QueuesOf is what the engine uses).
func NewQueues(c Clock) *Queues {
	return &Queues{c: c, real: isReal(c), epoch: c.Now()}
}

var realQueues = NewQueues(Real())

// QueuesOf returns a Queues on c: for the real clock, lists shared by the
// whole process (timers of one duration from every engine share a list);
// for any other clock, one whose every Entry is a timer of that clock.
func QueuesOf(c Clock) *Queues {
	if isReal(c) {
		return realQueues
	}
	return &Queues{c: c, direct: true}
}

// now is the time since qs's epoch, in nanoseconds: for the real clock a
// monotonic reading only (time.Since reads no wall clock).
func (qs *Queues) now() int64 {
	if qs.real {
		return int64(time.Since(qs.epoch))
	}
	return int64(qs.c.Now().Sub(qs.epoch))
}

// slotOf is the slot a duration's probing starts at (a Fibonacci hash).
func slotOf(d time.Duration) uint64 { return (uint64(d) * 0x9E3779B97F4A7C15) >> (64 - 5) }

// probes is how many slots a duration looks at, from the one its hash
// picks: popular durations can share a hash slot (1s and 5s do), and
// looking on finds each its own while slots remain.
const probes = 8

// queue returns the lists of duration d, making them on first use, or nil
// when every slot d may take holds another duration (see Queues).
func (qs *Queues) queue(d time.Duration) *queue {
	h := slotOf(d)
	for i := uint64(0); i < probes; i++ {
		slot := &qs.slots[(h+i)%uint64(len(qs.slots))]
		q := slot.Load()
		if q == nil {
			// Four lists per processor, so that two processors' entries
			// seldom share one (and its lock).
			nq := &queue{d: d, shards: make([]qshard, min(4*runtime.GOMAXPROCS(0), 64))}
			for j := range nq.shards {
				nq.shards[j].qs = qs
			}
			if slot.CompareAndSwap(nil, nq) {
				return nq
			}
			q = slot.Load()
		}
		if q.d == d {
			return q
		}
	}
	return nil
}

// Arm arms e to call e.F after d (at once for d ≤ 0). e must not be armed
// already.
func (qs *Queues) Arm(e *Entry, d time.Duration) {
	var q *queue
	if !qs.direct {
		q = qs.queue(d)
	}
	if q == nil { // a timer of its own (see Queues)
		e.direct = true
		if e.t == nil {
			e.t = qs.c.AfterFunc(d, e.F)
		} else {
			e.t.Reset(d)
		}
		return
	}
	e.direct = false
	if e.home == 0 {
		// An Entry keeps the list it was first given: entries come from
		// pools kept per processor, so a processor's entries mostly share
		// its list, with no choosing per Arm.
		e.home = qs.next.Add(1)
	}
	s := &q.shards[e.home%uint32(len(q.shards))]
	when := qs.now() + int64(d)
	s.mu.Lock()
	e.when, e.shard, e.queued = when, s, true
	// Insert in deadline order, from the tail: the list's timers share one
	// duration, so the tail is the place, bar two Arms that read the clock
	// in one order and locked in the other.
	at := s.tail
	for at != nil && at.when > when {
		at = at.prev
	}
	e.prev = at
	if at == nil {
		e.next, s.head = s.head, e
	} else {
		e.next, at.next = at.next, e
	}
	if e.next == nil {
		s.tail = e
	} else {
		e.next.prev = e
	}
	if s.at == 0 || when < s.at {
		s.arm(when, int64(d))
	}
	s.mu.Unlock()
}

// arm (re)arms s's runtime timer for the deadline when, in d. Under s.mu.
func (s *qshard) arm(when, d int64) {
	s.at = when
	if s.t == nil {
		s.t = s.qs.c.AfterFunc(time.Duration(d), s.fire)
		return
	}
	s.t.Reset(time.Duration(d))
}

// Stop disarms e and reports whether it had not fired (its F will not run).
func (e *Entry) Stop() bool {
	if e.direct {
		return e.t.Stop()
	}
	s := e.shard
	if s == nil {
		return false
	}
	s.mu.Lock()
	if !e.queued {
		s.mu.Unlock()
		return false
	}
	s.unlink(e)
	s.mu.Unlock()
	return true
}

// unlink takes e off s's list. Under s.mu.
func (s *qshard) unlink(e *Entry) {
	if e.prev == nil {
		s.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		s.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	e.prev, e.next, e.queued = nil, nil, false
}

// fire runs when s's earliest deadline may have passed: it takes every
// entry due off the list, re-arms the runtime timer for the next deadline,
// and calls the due entries' F, each on a goroutine of its own but the last,
// which runs on this one (itself a goroutine of the runtime timer's own).
func (s *qshard) fire() {
	now := s.qs.now()
	var due []func()
	s.mu.Lock()
	for e := s.head; e != nil && e.when <= now; e = s.head {
		s.unlink(e)
		due = append(due, e.F)
	}
	s.at = 0
	if s.head != nil {
		s.arm(s.head.when, s.head.when-now)
	}
	s.mu.Unlock()
	for i, f := range due {
		if i == len(due)-1 {
			f()
		} else {
			go f()
		}
	}
}
