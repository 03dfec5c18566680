package resilience

import (
	"context"
	"testing"
	"time"

	pubclock "github.com/MrVSiK/gotry/clock"
)

// These tests pin defects of the first limiter (issue 29) through the
// limiter's admission API only, so they run against any version of it.

// TestLimitColdBurstKeepsTheEstimate: a new key's first answer arrives
// after its limit was already reached. That first window must not close in
// zero time (an infinite delivery rate, or NaN when the answer is a 503,
// and a target overflowing to a negative number): when overload answers
// then make two windows congested, the limit drops to the target the key's
// latency and rate give (twice the estimate plus headroom; here 20 in
// flight at 100ms, an estimate near 15), not to MinLimit.
func TestLimitColdBurstKeepsTheEstimate(t *testing.T) {
	for _, first := range []struct {
		name string
		res  limitResult
	}{{"first answer good", limitGood}, {"first answer a 503", limitOverload}} {
		t.Run(first.name, func(t *testing.T) {
			cfg := ConcurrencyLimit{MaxWait: -1}.withDefaults()
			l := newLimiter(&cfg)
			now := time.Unix(1_700_000_000, 0)
			held := 0
			for l.tryAcquire(CriticalityDefault) {
				held++
			}
			// The burst's first answer comes back 100ms later.
			now = now.Add(100 * time.Millisecond)
			l.release(when(now), 100*time.Millisecond, first.res)
			held--
			// Then 20 in flight at 100ms each (200/s); after half a second
			// every fourth answer is a 503.
			for i := range 600 {
				for held < 20 && l.tryAcquire(CriticalityDefault) {
					held++
				}
				now = now.Add(5 * time.Millisecond)
				res := limitGood
				if i >= 100 && i%4 == 0 {
					res = limitOverload
				}
				l.release(when(now), 100*time.Millisecond, res)
				held--
			}
			if got := l.Limit(); got < 10 {
				t.Errorf("limit %d after a cold burst and congested windows, want ≥ 10 (twice the estimate of ~15 plus headroom)", got)
			}
		})
	}
}

// TestLimitCriticalDisplacesAWaiter: with the wait queue full of
// default-criticality attempts, a critical one does not get shed: it takes
// the place of a default waiter, which is shed instead, and it gets the
// next permit.
func TestLimitCriticalDisplacesAWaiter(t *testing.T) {
	fc := pubclock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := ConcurrencyLimit{InitialLimit: 2, MinLimit: 2, MaxLimit: 2, MaxWait: time.Hour}.withDefaults()
	l := newLimiter(&cfg)
	l.algo.settled = true // past its start, where twice the limit may wait
	for range 2 {
		if !l.tryAcquire(CriticalityDefault) {
			t.Fatal("no permit below the limit")
		}
	}
	ctx := context.Background()
	type outcome struct {
		crit Criticality
		ok   bool
	}
	done := make(chan outcome, 3)
	wait := func(c Criticality) {
		ok, _ := l.acquire(ctx, c, whenOn(fc, fc.Now()))
		done <- outcome{c, ok}
	}
	armed := fc.Armed()
	go wait(CriticalityDefault)
	go wait(CriticalityDefault)
	if !fc.WaitForArmed(armed+2, 10*time.Second) {
		t.Fatal("the default attempts never started waiting")
	}
	go wait(CriticalityCritical)
	first := <-done
	if first.crit != CriticalityDefault || first.ok {
		t.Fatalf("first attempt to leave the queue: %v granted=%v; want a default one shed for the critical one", first.crit, first.ok)
	}
	if !fc.WaitForArmed(armed+3, 10*time.Second) {
		t.Fatal("the critical attempt never started waiting")
	}
	l.release(when(fc.Now()), time.Millisecond, limitGood)
	if next := <-done; next.crit != CriticalityCritical || !next.ok {
		t.Errorf("after a release: %v granted=%v; want the critical attempt granted", next.crit, next.ok)
	}
	l.release(when(fc.Now()), time.Millisecond, limitGood)
	if last := <-done; last.crit != CriticalityDefault || !last.ok {
		t.Errorf("after a second release: %v granted=%v; want the remaining default attempt granted", last.crit, last.ok)
	}
}

// TestLimitShedsSheddableAtThreeQuarters: a sheddable attempt is admitted
// while fewer than three quarters of the limit are in use and shed once
// three quarters are (in flight ≥ ⌈¾·limit⌉), at every small limit; a
// default attempt gets the rest.
func TestLimitShedsSheddableAtThreeQuarters(t *testing.T) {
	for lim := 1; lim <= 40; lim++ {
		cfg := ConcurrencyLimit{InitialLimit: lim, MinLimit: lim, MaxLimit: lim, MaxWait: -1}.withDefaults()
		l := newLimiter(&cfg)
		n := 0
		for l.tryAcquire(CriticalitySheddable) {
			n++
		}
		if 4*n < 3*lim || 4*(n-1) >= 3*lim {
			t.Errorf("limit %d: %d sheddable admitted (%.0f%% in use when shed), want shed first at %d in flight, ¾ of the limit",
				lim, n, 100*float64(n)/float64(lim), (3*lim+3)/4)
		}
		for l.tryAcquire(CriticalityDefault) {
			n++
		}
		if n != lim {
			t.Errorf("limit %d: %d in flight once default attempts fill it", lim, n)
		}
	}
}
