package resilience

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The budget's two sides, on simulated time: what it lets retries fix
// (independent failures, the ladder) and what it stops (an outage, an
// overload whose retries fail), at the shapes production has (one busy
// client, many quiet ones). The simulation calls the budget as the engine
// does: take before the backoff sleep, TimedOut for a timed-out attempt,
// Succeed and the attempt's token refunded when a call ends with a
// success; attempts answer in a millisecond.

// ladderShape is a client population: clients each sending rate requests a
// second, evenly spaced with a random phase per client.
type ladderShape struct {
	name    string
	clients int
	rate    float64
}

var (
	busyClient   = ladderShape{"one client × 100/s", 1, 100}
	quietClients = ladderShape{"100 clients × 1/s", 100, 1}
)

// ladderEvent is one attempt due at at.
type ladderEvent struct {
	at      time.Time
	client  int
	attempt int // 1-based
	tok     budgetToken
	paid    time.Time // when a retry's token was taken (zero for a first attempt)
}

type ladderQueue []ladderEvent

func (q ladderQueue) Len() int           { return len(q) }
func (q ladderQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q ladderQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *ladderQueue) Push(x any)        { *q = append(*q, x.(ladderEvent)) }
func (q *ladderQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// ladderResult is what a population's requests got.
type ladderResult struct {
	requests, succeeded, attempts int
	refused                       int // retries the budget refused
}

func (r ladderResult) success() float64    { return float64(r.succeeded) / float64(r.requests) }
func (r ladderResult) perRequest() float64 { return float64(r.attempts) / float64(r.requests) }

// simulateBudget runs shape for d of simulated time with the default budget
// and 3 attempts, the default backoff (100 ms, doubling, full jitter). fails
// reports whether an attempt at t fails; it is called once per attempt in
// time order. Each client has a budget of its own.
func simulateBudget(seed uint64, shape ladderShape, d time.Duration, fails func(ev ladderEvent, rng *rand.Rand) bool) ladderResult {
	rng := rand.New(rand.NewPCG(seed, 1))
	start := time.Unix(1_000_000, 0)
	budgets := make([]*retryBudget, shape.clients)
	for i := range budgets {
		budgets[i] = newRetryBudget(DefaultBudgetRatio, DefaultBudgetReserve)
	}
	var q ladderQueue
	period := time.Duration(float64(time.Second) / shape.rate)
	for c := range shape.clients {
		phase := time.Duration(rng.Int64N(int64(period)))
		for t := start.Add(phase); t.Before(start.Add(d)); t = t.Add(period) {
			q = append(q, ladderEvent{at: t, client: c, attempt: 1})
		}
	}
	heap.Init(&q)
	var res ladderResult
	for q.Len() > 0 {
		ev := heap.Pop(&q).(ladderEvent)
		b := budgets[ev.client]
		if ev.attempt == 1 {
			res.requests++
		}
		res.attempts++
		end := ev.at.Add(time.Millisecond)
		if !fails(ev, rng) {
			b.Succeed(end, ev.tok)
			res.succeeded++
			continue
		}
		b.Fail(end, ev.tok, false)
		if ev.attempt == 3 {
			continue
		}
		tok, ok := b.take(end, false)
		if !ok {
			res.refused++
			continue
		}
		delay := time.Duration(rng.Int64N(int64(100*time.Millisecond) << (ev.attempt - 1)))
		heap.Push(&q, ladderEvent{at: end.Add(delay), client: ev.client, attempt: ev.attempt + 1, tok: tok, paid: end})
	}
	return res
}

// independent fails each attempt with probability p.
func independent(p float64) func(ladderEvent, *rand.Rand) bool {
	return func(_ ladderEvent, rng *rand.Rand) bool { return rng.Float64() < p }
}

// TestBudgetMasksIndependentFailures holds the ladder: with defaults, a
// failure that a retry fixes is fixed as 3 attempts can fix it, for one
// busy client and for a hundred quiet ones, over 60 s (6,000 requests) and
// five seeds each. What is held is the budget's own loss, the requests
// whose retry it refused; the rest of the failures (p³ of the requests)
// are the 3 attempts' and vary with the seed.
func TestBudgetMasksIndependentFailures(t *testing.T) {
	for _, tc := range []struct {
		p     float64
		shape ladderShape
		// refused is the largest share of requests whose retry the budget
		// may refuse. A quiet client lives on its reserve of 2: after a
		// request whose 3 attempts all failed (p³), its next request's
		// retry finds it empty if that request fails too, about p⁴ of
		// requests (0.8% at 30%).
		refused float64
	}{
		{0.10, busyClient, 0},
		{0.20, busyClient, 0.001},
		{0.30, busyClient, 0.005},
		{0.10, quietClients, 0.001},
		{0.20, quietClients, 0.005},
		{0.30, quietClients, 0.02},
	} {
		for seed := range uint64(5) {
			res := simulateBudget(seed, tc.shape, 60*time.Second, independent(tc.p))
			t.Logf("p = %.0f%%, %s, seed %d: %.2f%% succeeded (ideal %.2f%%), %.3f attempts a request, %d refused",
				tc.p*100, tc.shape.name, seed, 100*res.success(), 100*(1-tc.p*tc.p*tc.p), res.perRequest(), res.refused)
			if got := float64(res.refused) / float64(res.requests); got > tc.refused {
				t.Errorf("p = %.0f%%, %s, seed %d: the budget refused the retry of %.2f%% of %d requests, want ≤ %.1f%%",
					tc.p*100, tc.shape.name, seed, 100*got, res.requests, 100*tc.refused)
			}
		}
	}
}

// TestBudgetHoldsAnOutage holds the other side in the same terms: when every
// attempt fails (retries fail too), a client sends about one attempt a
// request, however busy it is: the reserve once, and the first second's
// deposits, over an 8 s outage after 10 s of health (the requests and
// attempts counted are those at or after the outage's start).
func TestBudgetHoldsAnOutage(t *testing.T) {
	for _, tc := range []struct {
		shape ladderShape
		max   float64 // attempts per request during the outage
	}{
		{busyClient, 1.05},
		// A quiet client spends its reserve (2) once: 2 retries over 8
		// requests at most, the bound the godoc states.
		{quietClients, 1 + 2.0/8},
		// The fleet shape of the bench: 500 requests a second shared by
		// 100 clients; the reserve once is 200 retries over 4,000 requests.
		{ladderShape{"100 clients × 5/s", 100, 5}, 1.05},
	} {
		for seed := range uint64(5) {
			outage := time.Unix(1_000_000, 0).Add(10 * time.Second)
			var during ladderResult
			simulateBudget(seed, tc.shape, 18*time.Second, func(ev ladderEvent, _ *rand.Rand) bool {
				if ev.at.Before(outage) {
					return false
				}
				during.attempts++
				if ev.attempt == 1 {
					during.requests++
				}
				return true
			})
			if got := during.perRequest(); got > tc.max {
				t.Errorf("%s, seed %d: %.3f attempts a request during the outage (%d requests), want ≤ %.3f",
					tc.shape.name, seed, got, during.requests, tc.max)
			}
		}
	}
}

// ladderLog is what a simulated fleet did, for checking the budget's bound:
// when each call succeeded (its end, when the budget was told) and when
// each retry that failed had been paid for.
type ladderLog struct {
	successes, lostRetries []time.Time
}

// record wraps fails so that log keeps what the attempts did.
func (log *ladderLog) record(fails func(ladderEvent, *rand.Rand) bool) func(ladderEvent, *rand.Rand) bool {
	return func(ev ladderEvent, rng *rand.Rand) bool {
		failed := fails(ev, rng)
		switch {
		case !failed:
			log.successes = append(log.successes, ev.at.Add(time.Millisecond))
		case ev.attempt > 1:
			log.lostRetries = append(log.lostRetries, ev.paid)
		}
		return failed
	}
}

// fleetBound is the bound the budget's doc states for a fleet of n clients
// over the interval [a, end]: ratio × S + n × reserve + P, S counting the
// successes from nine seconds before a's second through end's, and P the
// refills, at most one per client per second of the interval and no more
// than the successes in it.
func (log *ladderLog) fleetBound(n int, a, end time.Time) float64 {
	first, last := a.Unix(), end.Unix()
	s := countIn(log.successes, time.Unix(first-9, 0), time.Unix(last+1, 0))
	p := min(int64(countIn(log.successes, a, end.Add(time.Nanosecond))), int64(n)*(last-first+1))
	return math.Floor(DefaultBudgetRatio*float64(s)) + float64(n*DefaultBudgetReserve) + float64(p)
}

// drawLadderShape draws a fleet: 1 to 20 clients, 100 calls a second at
// most in all, each client at least one call every two seconds.
func drawLadderShape(t *rapid.T) ladderShape {
	clients := rapid.IntRange(1, 20).Draw(t, "clients")
	rate := rapid.Float64Range(0.5, 100/float64(clients)).Draw(t, "rate")
	return ladderShape{"drawn", clients, rate}
}

// TestBudgetFleetBoundUnderIndependentFailures: the fleet bound the
// budget's doc states holds, over the whole run, for any fleet whose
// attempts fail independently with any probability p (a retry fixes a
// failure as often as a first attempt avoids one), with the default
// budget and 3 attempts.
func TestBudgetFleetBoundUnderIndependentFailures(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shape := drawLadderShape(t)
		p := rapid.Float64Range(0, 1).Draw(t, "p")
		d := time.Duration(rapid.IntRange(1, 20).Draw(t, "seconds")) * time.Second
		var log ladderLog
		res := simulateBudget(rapid.Uint64().Draw(t, "seed"), shape, d, log.record(independent(p)))
		start := time.Unix(1_000_000, 0)
		end := start.Add(d + time.Second) // past the last retry's end
		if lost, bound := float64(len(log.lostRetries)), log.fleetBound(shape.clients, start, end); lost > bound {
			t.Fatalf("%d × %g/s, p = %.3f, %v: %d retries failed, bound %v (%d requests, %d succeeded)",
				shape.clients, shape.rate, p, d, len(log.lostRetries), bound, res.requests, res.succeeded)
		}
	})
}

// TestBudgetFleetBoundInAnOutage: for any fleet, after any healthy spell
// (none included), an outage of any length (every attempt fails, retries
// too) gets at most the fleet bound of failed retries paid for during it:
// the reserves and what the successes before it deposited, however long it
// lasts.
func TestBudgetFleetBoundInAnOutage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shape := drawLadderShape(t)
		start := time.Unix(1_000_000, 0)
		outage := start.Add(time.Duration(rapid.Int64Range(0, int64(15*time.Second)).Draw(t, "healthy")))
		d := outage.Sub(start) + time.Duration(rapid.Int64Range(int64(time.Second), int64(20*time.Second)).Draw(t, "outage"))
		var log ladderLog
		simulateBudget(rapid.Uint64().Draw(t, "seed"), shape, d, log.record(func(ev ladderEvent, _ *rand.Rand) bool {
			return !ev.at.Before(outage)
		}))
		end := start.Add(d + time.Second)
		lost := countIn(log.lostRetries, outage, end)
		if bound := log.fleetBound(shape.clients, outage, end); float64(lost) > bound {
			t.Fatalf("%d × %g/s, outage from %v for %v: %d retries paid during it failed, bound %v",
				shape.clients, shape.rate, outage.Sub(start), d-outage.Sub(start), lost, bound)
		}
	})
}
