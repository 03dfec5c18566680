// Package schedule computes backoff delays: a pure calculator that never
// sleeps, starts no goroutines and does no I/O. It says how long to wait; the
// caller owns the loop and the timer.
//
// A Schedule walks the progression Base, Base·Factor, Base·Factor², ...
// capped at MaxDelay, and randomises each value by one of three jitter
// strategies. Most callers want New and then either Next, for a loop of their
// own:
//
//	s, err := schedule.New(schedule.Config{
//		Base:     100 * time.Millisecond,
//		Jitter:   50 * time.Millisecond,
//		MaxDelay: 30 * time.Second,
//	})
//	...
//	for err := work(); err != nil; err = work() {
//		time.Sleep(s.Next()) // 100ms, 200ms, 400ms, ... each plus up to 50ms
//	}
//	s.Reset()
//
// or the Schedule itself as a resilience.Backoff (its Delay method computes
// the same values from the retry number alone). AddJitter is the jitter step
// on its own, for work paced at a fixed interval rather than backing off.
//
// The zero Config is valid and describes a schedule that always returns 0;
// the zero Schedule also returns 0 from every method. Jitter draws come from
// the same implementation as the backoffs of package resilience, with the
// same closed bounds: JitterAdditive adds an amount in [0, Jitter], JitterFull
// draws from [0, d] and JitterEqual from [d/2, d]. A Schedule is safe for
// concurrent use.
package schedule
