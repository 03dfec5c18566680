package resilience

import (
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// instant is the time of one decision of the engine: a call's admission,
// a retry's or a hedge's, an attempt's start or end, a backoff sleep's
// start or end. It is made where the decision starts and passed down to
// everything that decides with it (the host table, the breaker, the
// budget, the concurrency limit, adaptive hedging), so that the decision
// reads the clock at most once and every comparison within it sees the
// same time.
//
// Both of its times are read lazily, on first use, and then kept: the
// coarse second (what the budget's buckets want) from the engine's
// clock.Seconds, an atomic load; and the exact time, a read of the clock,
// which only what measures or compares durations wants (a breaker that is
// not closed, a new key, the limit and adaptive hedging, a deadline, the
// hooks' events). So a decision that needs no exact time, such as a
// success through a closed breaker, reads no clock at all; and one that
// found its second by reading the clock (a fake clock's Seconds, or one
// whose refresh had stopped) keeps that read as its exact time.
//
// Once read, a time does not change: the second, if read before the exact
// time, stays the coarse one (which may lag the exact time by the refresh's
// delay). An instant belongs to the goroutine making the decision; it is
// not safe for concurrent use.
type instant struct {
	src    *clock.Seconds // the engine's clock, read through its current second
	sec    int64          // the Unix second, once hasSec
	at     time.Time      // the exact time, once hasAt
	hasSec bool
	hasAt  bool
}

// clock returns the clock the decision's time is read from, for what
// measures a wait from it (the concurrency limit's queue).
func (in *instant) clock() clock.Clock { return in.src.Clock() }

// now returns the decision's exact time, reading the clock the first time.
func (in *instant) now() time.Time {
	if !in.hasAt {
		in.readNow()
	}
	return in.at
}

func (in *instant) readNow() {
	in.at, in.hasAt = in.src.Now(), true
	if !in.hasSec {
		in.sec, in.hasSec = in.at.Unix(), true
	}
}

// second returns the start of the decision's Unix second, for the budget.
// (It and now are small enough to inline: a call's success path runs
// them.)
func (in *instant) second() time.Time { return time.Unix(in.unix(), 0) }

// unix returns the decision's Unix second.
func (in *instant) unix() int64 {
	if !in.hasSec {
		in.readSecond()
	}
	return in.sec
}

func (in *instant) readSecond() {
	if sec, ok := in.src.Coarse(); ok {
		in.sec, in.hasSec = sec, true
		return
	}
	var now time.Time
	in.sec, now, in.hasAt = in.src.Read()
	if in.hasAt {
		in.at = now
	}
	in.hasSec = true
}
