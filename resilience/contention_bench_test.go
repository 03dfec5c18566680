package resilience

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The benchmarks in this file measure the per-call bookkeeping of the breaker
// and the budget, run from one goroutine ("sequential") and from GOMAXPROCS
// goroutines at once ("parallel"). Every call goes to the same host and the
// same second, the worst case for sharing: if the hot path took a lock or
// wrote a word that every core writes, the parallel time per operation would
// rise well above the sequential one instead of falling.

// BenchmarkBreakerAdmitDone: one successful call's trip through its host's
// closed breaker (admit, then done with a success).
func BenchmarkBreakerAdmitDone(b *testing.B) {
	const host = "payments.internal"
	now := t0
	b.Run("sequential", func(b *testing.B) {
		s := newBreakerSet(BreakerConfig{}, nil)
		b.ReportAllocs()
		for b.Loop() {
			tk, _, err := s.admit(host, now)
			if err != nil {
				b.Fatal(err)
			}
			s.done(tk, outcomeSuccess, when(now))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := newBreakerSet(BreakerConfig{}, nil)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tk, _, err := s.admit(host, now)
				if err != nil {
					b.Error(err)
					return
				}
				s.done(tk, outcomeSuccess, when(now))
			}
		})
	})
}

// BenchmarkBudgetDeposit: every original request's deposit. Each goroutine
// has a clock of its own, starting somewhere in one millisecond and ticking
// 17ns a deposit, because a budget that spreads deposits by their time
// would be flattered by one instant and hidden by time.Now (60ns and more on
// a virtual machine). "parallel-one-instant" deposits at one instant from
// every goroutine: the worst case for such a budget.
func BenchmarkBudgetDeposit(b *testing.B) {
	clock := func() func() time.Time {
		now := t0.Add(time.Duration(rand.Int64N(int64(time.Millisecond))))
		return func() time.Time {
			now = now.Add(17)
			return now
		}
	}
	b.Run("sequential", func(b *testing.B) {
		bu := newRetryBudget(0.1, 10)
		tick := clock()
		b.ReportAllocs()
		for b.Loop() {
			bu.Succeed(tick(), budgetToken{})
		}
	})
	b.Run("parallel", func(b *testing.B) {
		bu := newRetryBudget(0.1, 10)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			tick := clock()
			for pb.Next() {
				bu.Succeed(tick(), budgetToken{})
			}
		})
	})
	b.Run("parallel-one-instant", func(b *testing.B) {
		bu := newRetryBudget(0.1, 10)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Succeed(t0, budgetToken{})
			}
		})
	})
}

// BenchmarkBudgetTake: a retry asking for (and getting back) a token, the
// rare path that sums the window. The floor is off so the deposits are read.
func BenchmarkBudgetTake(b *testing.B) {
	now := t0.Add(500 * time.Millisecond)
	bu := newRetryBudget(1, 0)
	for range 1000 {
		bu.Succeed(now, budgetToken{})
	}
	b.ReportAllocs()
	for b.Loop() {
		tok, ok := bu.take(now, false)
		if !ok {
			b.Fatal("refused")
		}
		tok.Refund()
	}
}
