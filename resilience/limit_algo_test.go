package resilience

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestLimitAlgoNext drives the pure update window by window: each row is a
// fresh key (InitialLimit 20, MinLimit 1, MaxLimit 1000) given a sequence of
// window summaries, and the limit after the last one.
func TestLimitAlgoNext(t *testing.T) {
	ms := time.Millisecond
	// calm: 100 answers in 100ms, 10ms on average, the fastest 5ms, 10 in
	// flight at most: an estimate of 1000/s × 10ms = 10 attempts served
	// at once.
	calm := limitWindow{elapsed: 100 * ms, good: 100, sum: 100 * 10 * ms, least: 5 * ms, peak: 10}
	full := calm
	full.filled, full.peak = true, 20
	queued := full
	queued.sum, queued.least = 100*18*ms, 12*ms // even the fastest answer waited
	shedding := limitWindow{elapsed: 100 * ms, good: 80, overload: 20, sum: 80 * 10 * ms, least: 5 * ms, peak: 20}
	only503 := limitWindow{elapsed: 100 * ms, overload: 50, peak: 20}
	// A client with a small share of the downstream: 5 answers a window,
	// 2 in flight at most; then half its answers are 503s with 4 in flight.
	share := limitWindow{elapsed: 100 * ms, good: 5, sum: 5 * 10 * ms, least: 8 * ms, peak: 2}
	shareHit := limitWindow{elapsed: 100 * ms, good: 3, overload: 3, sum: 3 * 10 * ms, least: 10 * ms, peak: 4}
	for _, c := range []struct {
		name     string
		windows  []limitWindow
		want     int
		wantBase time.Duration
	}{
		{"cold start below the limit keeps InitialLimit", []limitWindow{calm}, 20, 10 * ms},
		{"cold start, a quiet key (3 answers in a second) keeps InitialLimit",
			[]limitWindow{{elapsed: time.Second, good: 3, sum: 3 * 200 * ms, least: 150 * ms, peak: 1}}, 20, 200 * ms},
		{"cold burst: the first answer after the limit filled, in no time: room to grow",
			[]limitWindow{{elapsed: 0, good: 1, sum: 100 * ms, least: 100 * ms, peak: 20, filled: true}}, 40, 100 * ms},
		{"cold burst whose first answer is a 503, in no time: hold",
			[]limitWindow{{elapsed: 0, overload: 1, peak: 20, filled: true}}, 20, 0},
		{"cold burst in no time, then two windows of 20% 503s: twice the estimate (800/s × 10ms)",
			[]limitWindow{{elapsed: 0, good: 1, sum: 10 * ms, least: 10 * ms, peak: 20, filled: true}, shedding, shedding}, 16, 10 * ms},
		{"503s only halve the limit each window", []limitWindow{only503, only503}, 5, 0},
		{"503s only take it to MinLimit", []limitWindow{only503, only503, only503, only503, only503, only503}, 1, 0},
		{"a small share, half its answers 503s: cut from what is in flight, not from the limit",
			[]limitWindow{share, shareHit}, 2, 10 * ms},
		{"one 503 among a handful of answers is not an overload",
			[]limitWindow{share, {elapsed: 100 * ms, good: 4, overload: 1, sum: 40 * ms, least: 8 * ms, peak: 3}}, 20, 10 * ms},
		{"a burst with no queue doubles the limit", []limitWindow{calm, full}, 40, 10 * ms},
		{"a window with a queue holds the limit", []limitWindow{calm, full, queued}, 40, 10 * ms},
		{"a queue does not move the no-load latency", []limitWindow{calm, queued, queued}, 20, 10 * ms},
		{"a small share at the limit, two answers both slow (a queue or bad luck): one more, not twice",
			[]limitWindow{share, {elapsed: 200 * ms, good: 2, sum: 2 * 35 * ms, least: 30 * ms, peak: 20, filled: true}}, 21, 10 * ms},
		{"a small share at the limit, two answers that both queued over 4 no-load latencies: hold, not one more",
			[]limitWindow{share, {elapsed: 200 * ms, good: 2, sum: 2 * 60 * ms, least: 50 * ms, peak: 20, filled: true}}, 20, 10 * ms},
		{"a small share at the limit, two fast answers: twice",
			[]limitWindow{share, {elapsed: 200 * ms, good: 2, sum: 2 * 10 * ms, least: 9 * ms, peak: 20, filled: true}}, 40, 10 * ms},
		{"a small share at the limit, one answer and one timeout: too few to cut or to grow on",
			[]limitWindow{share, {elapsed: 200 * ms, good: 1, overload: 1, sum: 10 * ms, least: 10 * ms, peak: 20, filled: true}}, 20, 10 * ms},
		{"three slow answers at the limit are a queue: hold",
			[]limitWindow{share, {elapsed: 200 * ms, good: 3, sum: 3 * 60 * ms, least: 50 * ms, peak: 20, filled: true}}, 20, 10 * ms},
		{"a huge rate saturates at MaxLimit",
			[]limitWindow{{elapsed: 1, good: 1_000_000, sum: 1_000_000 * ms, least: ms, peak: 500, filled: true}, {elapsed: 1, good: 1_000_000, sum: 1_000_000 * ms, least: ms, peak: 500, filled: true}}, 1000, ms},
		{"negative latencies (a clock stepped back) teach nothing",
			[]limitWindow{{elapsed: 100 * ms, good: 5, sum: -5 * ms, peak: 2}}, 20, 0},
		{"a window of nothing changes nothing", []limitWindow{{}}, 20, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ConcurrencyLimit{}.withDefaults()
			a := newLimitAlgo(&cfg)
			got := 0
			for _, w := range c.windows {
				got = a.next(w)
			}
			if got != c.want || a.base != c.wantBase {
				t.Errorf("limit %d, no-load latency %v; want %d, %v", got, a.base, c.want, c.wantBase)
			}
		})
	}
}

// TestLimitAlgoFallsToItsShareAndComesBack: a limit cut by overload
// answers decays no further once they stop, and windows that fill it
// double it back: it never returns to InitialLimit at once (a fleet that
// backed off together would refill the downstream together).
func TestLimitAlgoFallsToItsShareAndComesBack(t *testing.T) {
	ms := time.Millisecond
	cfg := ConcurrencyLimit{}.withDefaults()
	a := newLimitAlgo(&cfg)
	share := limitWindow{elapsed: 100 * ms, good: 5, sum: 5 * 10 * ms, least: 8 * ms, peak: 2}
	a.next(share)
	for range 4 {
		a.next(limitWindow{elapsed: 100 * ms, good: 2, overload: 4, sum: 2 * 10 * ms, least: 10 * ms, peak: 4})
	}
	if a.limit != 1 {
		t.Fatalf("limit %d after four overloaded windows, want 1", a.limit)
	}
	a.next(share)
	if a.limit != 1 {
		t.Errorf("limit %d after a calm window below it, want it held at 1", a.limit)
	}
	var got []int
	for range 5 {
		w := share
		w.filled, w.peak = true, a.limit
		got = append(got, a.next(w))
	}
	if want := []int{2, 4, 8, 16, 32}; !slices.Equal(got, want) {
		t.Errorf("limits over windows that fill it %v, want %v", got, want)
	}
}

// TestLimitAlgoToLimit: a limit computed in floating point lands in
// [MinLimit, MaxLimit] whatever it is, NaN and infinities included.
func TestLimitAlgoToLimit(t *testing.T) {
	cfg := ConcurrencyLimit{MinLimit: 2, MaxLimit: 50}.withDefaults()
	a := newLimitAlgo(&cfg)
	for _, c := range []struct {
		x    float64
		want int
	}{
		{math.NaN(), 2}, {math.Inf(1), 50}, {math.Inf(-1), 2}, {1e300, 50}, {-1e300, 2},
		{0, 2}, {2, 2}, {2.1, 3}, {49.5, 50}, {50, 50}, {float64(math.MaxInt32) * 4, 50},
	} {
		if got := a.toLimit(c.x); got != c.want {
			t.Errorf("toLimit(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TestLimitWindowSummary: a window's rate and mean are finite and zero
// when there is nothing to divide by.
func TestLimitWindowSummary(t *testing.T) {
	for _, c := range []struct {
		name     string
		w        limitWindow
		rate     float64
		mean     time.Duration
		complete bool // with no no-load latency yet, the limit filled
	}{
		{"no time", limitWindow{good: 5, sum: 5 * time.Millisecond}, 0, time.Millisecond, false},
		{"negative time", limitWindow{elapsed: -time.Second, good: 5, sum: 5 * time.Millisecond}, 0, time.Millisecond, false},
		{"only 503s", limitWindow{elapsed: time.Second, overload: 10}, 0, 0, true},
		{"ten answers in 50ms", limitWindow{elapsed: 50 * time.Millisecond, good: 10, sum: 10 * time.Millisecond}, 200, time.Millisecond, true},
		{"three answers in 50ms close", limitWindow{elapsed: 50 * time.Millisecond, good: 3, sum: 3 * time.Millisecond}, 60, time.Millisecond, true},
		{"two answers in 50ms wait for more", limitWindow{elapsed: 50 * time.Millisecond, good: 2, sum: 2 * time.Millisecond}, 40, time.Millisecond, false},
		{"two answers in 200ms close", limitWindow{elapsed: 200 * time.Millisecond, good: 2, sum: 2 * time.Millisecond}, 10, time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ConcurrencyLimit{}.withDefaults()
			a := newLimitAlgo(&cfg)
			if r := c.w.rate(); math.Abs(r-c.rate) > 1e-9 {
				t.Errorf("rate %v, want %v", r, c.rate)
			}
			if m := c.w.mean(); m != c.mean {
				t.Errorf("mean %v, want %v", m, c.mean)
			}
			if got := a.complete(c.w.elapsed, c.w.results(), true); got != c.complete {
				t.Errorf("complete %v, want %v", got, c.complete)
			}
		})
	}
}

// TestLimitAlgoClosesAColdBurstEarly: a key in its start (no no-load
// latency yet, or only windows that filled the limit since) whose limit
// filled closes its window once three good answers are back and it has
// lasted the fastest one's latency, before the 50ms (or 4 latencies) a
// window lasts at least; not with fewer answers, not in less time, not
// once a window did not fill the limit, not when this one did not.
func TestLimitAlgoClosesAColdBurstEarly(t *testing.T) {
	ms := time.Millisecond
	three := limitWindow{good: 3, sum: 3 * 12 * ms, least: 10 * ms}
	for _, c := range []struct {
		name    string
		el      time.Duration
		w       limitWindow
		filled  bool
		known   bool // the no-load latency is known
		settled bool // and a window did not fill the limit
		want    bool
	}{
		{"three answers, one fastest latency long", 10 * ms, three, true, false, false, true},
		{"three answers, shorter than the fastest", 9 * ms, three, true, false, false, false},
		{"two answers", 20 * ms, limitWindow{good: 2, sum: 2 * 10 * ms, least: 10 * ms}, true, false, false, false},
		{"three overload answers", 20 * ms, limitWindow{overload: 3}, true, false, false, false},
		{"the limit did not fill", 20 * ms, three, false, false, false, false},
		{"the latency is known, every window so far filled the limit", 20 * ms, three, true, true, false, true},
		{"the key has settled", 20 * ms, three, true, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ConcurrencyLimit{}.withDefaults()
			a := newLimitAlgo(&cfg)
			if c.known {
				a.base = 10 * ms
			}
			a.settled = c.settled
			if got := a.completeCold(c.el, c.w, c.filled); got != c.want {
				t.Errorf("completeCold %v, want %v", got, c.want)
			}
		})
	}
}

// TestLimitAlgoClosesOnOverloadAnswers: a window closes at once on
// overload answers when they are more than a tenth of what a whole window
// brings at the key's rate: two for a client that sees a few results per
// window, more for one that sees many; not on one, not in no time, not
// right after a cut.
func TestLimitAlgoClosesOnOverloadAnswers(t *testing.T) {
	ms := time.Millisecond
	// small: 5 answers in 100ms (50/s); large: 100 in 100ms (1000/s).
	// Both at 10ms: a window spans 50ms, where the large key has 50
	// results and the small one 2.5.
	small := limitWindow{elapsed: 100 * ms, good: 5, sum: 5 * 10 * ms, least: 8 * ms, peak: 2}
	large := limitWindow{elapsed: 100 * ms, good: 100, sum: 100 * 10 * ms, least: 8 * ms, peak: 10}
	for _, c := range []struct {
		name   string
		before []limitWindow
		el     time.Duration
		w      limitWindow
		want   bool
	}{
		{"a small share, two timeouts", []limitWindow{small}, 5 * ms, limitWindow{overload: 2}, true},
		{"a small share, one timeout", []limitWindow{small}, 5 * ms, limitWindow{overload: 1}, false},
		{"a small share, two timeouts in no time", []limitWindow{small}, 0, limitWindow{overload: 2}, false},
		{"a small share, two timeouts right after a cut",
			[]limitWindow{small, {elapsed: 100 * ms, good: 1, overload: 3, sum: 10 * ms, least: 10 * ms, peak: 2}}, 5 * ms, limitWindow{overload: 2}, false},
		{"a large share, two timeouts are a tail's", []limitWindow{large}, 5 * ms, limitWindow{good: 10, overload: 2}, false},
		{"a large share, six timeouts are over a tenth of its window", []limitWindow{large}, 5 * ms, limitWindow{good: 10, overload: 6}, true},
		{"a large share, six among a hundred results are not", []limitWindow{large}, 40 * ms, limitWindow{good: 94, overload: 6}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := ConcurrencyLimit{}.withDefaults()
			a := newLimitAlgo(&cfg)
			for _, w := range c.before {
				a.next(w)
			}
			if got := a.completeOverloaded(c.el, c.w, false); got != c.want {
				t.Errorf("completeOverloaded %v, want %v", got, c.want)
			}
		})
	}
}

// TestLimitQueueOrder: waiters leave most critical first, in arrival order
// within a criticality; a full queue takes a more critical waiter in place
// of its newest least critical one and refuses one that is not more
// critical.
func TestLimitQueueOrder(t *testing.T) {
	var q limitQueue
	d1, d2 := &limitWaiter{crit: CriticalityDefault}, &limitWaiter{crit: CriticalityDefault}
	c1, c2 := &limitWaiter{crit: CriticalityCritical}, &limitWaiter{crit: CriticalityCritical}
	d3 := &limitWaiter{crit: CriticalityDefault}
	for _, step := range []struct {
		w, want *limitWaiter // want: what push gives back
	}{{d1, nil}, {d2, nil}, {c1, d2}, {d3, d3}, {c2, d1}} {
		if got := q.push(step.w, 2); got != step.want {
			t.Fatalf("push: got back %p, want %p", got, step.want)
		}
	}
	for _, want := range []*limitWaiter{c1, c2} {
		if got := q.head(); got != want {
			t.Fatalf("head %p, want %p", got, want)
		}
		q.pop()
	}
	if q.len() != 0 || q.push(d1, 0) != d1 {
		t.Errorf("an empty queue of capacity 0 must refuse")
	}
}
