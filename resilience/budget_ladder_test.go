package resilience

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
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
		heap.Push(&q, ladderEvent{at: end.Add(delay), client: ev.client, attempt: ev.attempt + 1, tok: tok})
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
