package resilience

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBreakerHammeredAcrossTransitions drives one breaker from many
// goroutines at once through every state, with a shared clock that they
// advance, and checks what the lock-free paths must not break: never more
// probes in flight than HalfOpenProbes, every state change reported exactly
// once (the reports count the generations), and the reports chaining up
// (each open was entered once more than it was left, and so on).
func TestBreakerHammeredAcrossTransitions(t *testing.T) {
	const (
		goroutines = 8
		calls      = 3000
		probes     = 2
	)
	b := newBreakerSet(BreakerConfig{FailureThreshold: 3, OpenDuration: 5 * time.Millisecond, HalfOpenProbes: probes}, nil)
	var clock atomic.Int64 // nanoseconds after t0
	var inFlight atomic.Int64
	var mu sync.Mutex
	moves := map[transition]int{}
	report := func(tr transition) {
		if tr.Changed() {
			mu.Lock()
			moves[transition{From: tr.From, To: tr.To}]++
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range calls {
				now := t0.Add(time.Duration(clock.Add(int64(r.IntN(20)) * int64(time.Microsecond))))
				admit := b.admit
				if r.IntN(4) == 0 {
					admit = b.admitRetry
				}
				tk, tr, err := admit("h", now)
				report(tr)
				if err != nil {
					continue
				}
				if tk.Probe() {
					// Counted after the slot is taken and uncounted before
					// it is given back, so never above the slots in use.
					if n := inFlight.Add(1); n > probes {
						t.Errorf("%d probes in flight, limit %d", n, probes)
					}
				}
				o := outcomeFailure
				if r.IntN(3) == 0 {
					o = outcome(r.IntN(2)) // ignore or success
				}
				if tk.Probe() {
					inFlight.Add(-1)
				}
				report(b.done(tk, o, when(t0.Add(time.Duration(clock.Load())))))
			}
		}()
	}
	wg.Wait()

	w := b.hosts.lookup("h").br.load()
	total := 0
	for _, n := range moves {
		total += n
	}
	if total != int(w.gen()) {
		t.Fatalf("%d state changes reported, breaker is at generation %d: %v", total, w.gen(), moves)
	}
	t.Logf("%d state changes: %v", total, moves)
	if total < 3 {
		t.Fatalf("only %d state changes: the test did not drive the breaker through its states (%v)", total, moves)
	}
	// Entries minus exits of each state: 1 for the final state (closed counts
	// its start as an entry), 0 for the others.
	net := map[BreakerState]int{BreakerClosed: 1}
	for tr, n := range moves {
		net[tr.To] += n
		net[tr.From] -= n
	}
	for _, s := range []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen} {
		want := 0
		if s == w.state() {
			want = 1
		}
		if net[s] != want {
			t.Errorf("%v entered %d times more than it was left, want %d (final state %v): %v", s, net[s], want, w.state(), moves)
		}
	}
}

// TestBreakerOpensOnceUnderConcurrentFailures: when many attempts of one
// closed breaker fail at once, exactly one of them reports the opening, and
// the rest are dropped as stale.
func TestBreakerOpensOnceUnderConcurrentFailures(t *testing.T) {
	const goroutines = 16
	b := newBreakerSet(BreakerConfig{FailureThreshold: 4, OpenDuration: time.Second}, nil)
	tickets := make([]ticket, goroutines)
	for i := range tickets {
		tk, _, err := b.admit("h", t0)
		if err != nil {
			t.Fatal(err)
		}
		tickets[i] = tk
	}
	var opened atomic.Int64
	var wg sync.WaitGroup
	for _, tk := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tr := b.done(tk, outcomeFailure, when(t0)); tr.Changed() {
				if tr != (transition{Key: "h", From: BreakerClosed, To: BreakerOpen}) {
					t.Errorf("transition %+v", tr)
				}
				opened.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := opened.Load(); n != 1 {
		t.Fatalf("opening reported %d times, want once", n)
	}
	if s := b.State("h", t0); s != BreakerOpen {
		t.Fatalf("state %v, want open", s)
	}
}

// TestBreakerStaleSuccessKeepsNewFailures: a success admitted before the
// breaker went round (closed, open, half-open, closed again) must not clear
// the failures counted since. The lock-free success compares the generation
// along with the count, so it cannot.
func TestBreakerStaleSuccessKeepsNewFailures(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 2, OpenDuration: time.Second}, nil)
	old, _, _ := b.admit("h", t0)
	fail(t, b, "h", t0)
	fail(t, b, "h", t0) // opens
	later := t0.Add(time.Second)
	p, _, err := b.admit("h", later)
	if err != nil || !p.Probe() {
		t.Fatalf("probe: %v", err)
	}
	if tr := b.done(p, outcomeSuccess, when(later)); tr.To != BreakerClosed {
		t.Fatalf("probe success: %+v", tr)
	}
	fail(t, b, "h", later)
	if tr := b.done(old, outcomeSuccess, when(later)); tr.Changed() {
		t.Fatalf("stale success changed state: %+v", tr)
	}
	if trs := fail(t, b, "h", later); trs[1].To != BreakerOpen {
		t.Fatalf("second consecutive failure after the stale success did not open: %+v", trs)
	}
}

// TestBreakerWordPacking: the fields of a breaker's word do not bleed into
// each other, at their largest values too.
func TestBreakerWordPacking(t *testing.T) {
	tests := []struct {
		name     string
		w        breakerWord
		state    BreakerState
		failures uint32
		gen      uint32
	}{
		{"zero", 0, BreakerClosed, 0, 0},
		{"most failures", breakerWord(0).withFailures(maxFailures), BreakerClosed, maxFailures, 0},
		{"failures cleared", breakerWord(0).moved(BreakerClosed).withFailures(maxFailures).withFailures(0), BreakerClosed, 0, 1},
		{"moved", breakerWord(0).withFailures(7).moved(BreakerHalfOpen), BreakerHalfOpen, 0, 1},
		{"last generation", (breakerWord(1<<32-2) << genShift).moved(BreakerOpen).withFailures(maxFailures), BreakerOpen, maxFailures, 1<<32 - 1},
		{"generation wraps", (breakerWord(1<<32-1) << genShift).moved(BreakerOpen), BreakerOpen, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, f, g := tc.w.state(), tc.w.failures(), tc.w.gen(); s != tc.state || f != tc.failures || g != tc.gen {
				t.Fatalf("state %v failures %d gen %d, want %v %d %d", s, f, g, tc.state, tc.failures, tc.gen)
			}
		})
	}
}

// TestBreakerThresholdAboveTheWord: a FailureThreshold too large for the
// word's count is reported as configured and acts as the largest count.
func TestBreakerThresholdAboveTheWord(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1 << 40}, nil)
	if got := b.Config().FailureThreshold; got != 1<<40 {
		t.Errorf("Config().FailureThreshold = %d", got)
	}
	if b.threshold != maxFailures+1 {
		t.Errorf("threshold %d, want %d", b.threshold, maxFailures+1)
	}
}

// TestHostUsedAgainWritesNothing: a host used again while it is the
// table's most recent one leaves its recency alone (a transport calling one
// host shares no written word between its calls); another host's use in
// between moves it.
func TestHostUsedAgainWritesNothing(t *testing.T) {
	b := newBreakerSet(BreakerConfig{}, nil)
	stamp := func(key string) uint64 {
		t.Helper()
		if _, _, err := b.admit(key, t0); err != nil {
			t.Fatal(err)
		}
		return b.hosts.lookup(key).lastUsed.Load()
	}
	first := stamp("h")
	if again := stamp("h"); again != first {
		t.Errorf("h used again as the most recent: stamp %d → %d, want unchanged", first, again)
	}
	other := stamp("g")
	if back := stamp("h"); back <= other {
		t.Errorf("h used after g: stamp %d, want above g's %d", back, other)
	}
}
