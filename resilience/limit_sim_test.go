package resilience

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"
)

// A discrete-event model of the overload scenario the concurrency limit is
// for (Bronson et al., "Metastable Failures in Distributed Systems"): a
// server with a number of workers and one FIFO queue, where a request whose
// client gave up still costs its service time when it reaches the head;
// clients arriving at random (Poisson) at a share of the server's capacity,
// each with a deadline. The server may instead shed by itself (a bounded
// queue answering 503 at once when full); the load may come from a fleet
// of clients, each with its own limit, sharing the server; service times
// may be lognormal or Pareto, arrivals may come in microbursts. Time is
// simulated, so the limit's dynamics are tested exactly, whatever the
// machine is doing.

// overloadModel configures one run of the model.
type overloadModel struct {
	workers  int
	service  time.Duration // mean per request, outside the drop
	load     float64       // offered share of the capacity outside the drop
	deadline time.Duration // each request's; a later answer is not good
	dropAt   time.Duration // when the service time is multiplied by dropBy
	dropFor  time.Duration
	dropBy   float64
	sigma    float64                    // service times are lognormal with this sigma around service (0: fixed)
	pareto   float64                    // service times are Pareto with this shape α > 1 and mean service (0: not)
	queue    int                        // the server answers 503 at once when this many wait (0: an unbounded queue)
	clients  int                        // clients sharing the server, each with its own limit (0: one)
	burst    float64                    // arrivals come this many times as fast for burstLen every burstEvery (0: none)
	retries  int                        // a 503 or a timeout is retried at once this many times, given a permit
	length   time.Duration              // of the whole run
	overload func(t time.Duration) bool // the server answers 503 at once (nil: never)
	seed     uint64
	limit    ConcurrencyLimit
	noLimit  bool // clients with no limit, for comparison
	// wait: a first attempt that finds its client's limit reached waits
	// for a permit as the transport's does (ConcurrencyLimit.MaxWait, by
	// default four no-load latencies; at most as many waiting as the
	// limit), and is shed only when the wait ends without one. Without it
	// the model sheds at once, a stricter count than the transport's.
	wait bool
}

// The microbursts' shape: arrivals come burst times as fast for burstLen
// in every burstEvery, and slower in between, at the same mean load.
const (
	burstLen   = 50 * time.Millisecond
	burstEvery = 500 * time.Millisecond
)

// overloadResult is per second of the run.
type overloadResult struct {
	good      []int // answered within the deadline
	shed      []int // refused by the limit
	arrivals  []int // reached the server
	offered   []int
	rejected  []int // answered 503 by the server
	limits    []int // the (first client's) limit at the end of each second
	latencies []time.Duration
	goodBy    [][]int // per client, per second
}

type simEvent struct {
	at   time.Duration
	kind int // 0 arrival, 1 server done, 2 client deadline, 3 a wait for a permit ends
	req  *simRequest
}

type simRequest struct {
	client   int
	sent     time.Duration // this attempt's
	first    time.Duration // the request's first attempt's
	tries    int
	answered bool // the client has its result (or gave up)
	rejected bool // the server answered 503
	waiting  bool // for a permit (wait)
}

type simEvents []simEvent

func (q simEvents) Len() int { return len(q) }
func (q simEvents) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].kind > q[j].kind // at the same instant, answers before deadlines and arrivals
}
func (q simEvents) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simEvents) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simEvents) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// run simulates m and returns its per-second counts.
func (m overloadModel) run() overloadResult {
	cfg := m.limit.withDefaults()
	if !m.wait {
		cfg.MaxWait = -1 // the model sheds at once
	}
	n := max(m.clients, 1)
	ls := make([]*limiter, n)
	for i := range ls {
		ls[i] = newLimiter(&cfg)
	}
	rng := rand.New(rand.NewPCG(m.seed, 1))
	secs := int(m.length/time.Second) + 1
	res := overloadResult{good: make([]int, secs), shed: make([]int, secs), arrivals: make([]int, secs),
		offered: make([]int, secs), rejected: make([]int, secs), limits: make([]int, secs), goodBy: make([][]int, n)}
	for i := range res.goodBy {
		res.goodBy[i] = make([]int, secs)
	}
	capacity := float64(m.workers) / m.service.Seconds()
	rate := m.load * capacity
	// svc draws a service time of mean m.service (× dropBy in the drop): a
	// lognormal of median service·e^(-σ²/2), or a Pareto of scale
	// service·(α-1)/α, has mean service, so the capacity is the same
	// whatever the shape.
	svc := func(t time.Duration) time.Duration {
		d := float64(m.service)
		if t >= m.dropAt && t < m.dropAt+m.dropFor {
			d *= m.dropBy
		}
		switch {
		case m.pareto > 0:
			d *= (m.pareto - 1) / m.pareto / math.Pow(1-rng.Float64(), 1/m.pareto)
		case m.sigma > 0:
			d *= math.Exp(m.sigma*rng.NormFloat64() - m.sigma*m.sigma/2)
		}
		return time.Duration(d)
	}
	// gap draws the time to the next arrival at now.
	gap := func(now time.Duration) time.Duration {
		r := rate
		if m.burst > 0 {
			slow := rate * float64(burstEvery) / (float64(burstEvery-burstLen) + m.burst*float64(burstLen))
			r = slow
			if now%burstEvery < burstLen {
				r = m.burst * slow
			}
		}
		return time.Duration(rng.ExpFloat64() / r * float64(time.Second))
	}
	var q simEvents
	var fifo []*simRequest
	busy := 0
	push := func(e simEvent) { heap.Push(&q, e) }
	start := func(now time.Duration) {
		for busy < m.workers && len(fifo) > 0 {
			r := fifo[0]
			fifo = fifo[1:]
			busy++
			push(simEvent{at: now + svc(now), kind: 1, req: r})
		}
	}
	t0 := time.Unix(1_700_000_000, 0)
	// waiters are each client's first attempts waiting for a permit, in
	// arrival order.
	waiters := make([][]*simRequest, n)
	var dispatch func(r *simRequest, now time.Duration, sec int)
	release := func(r *simRequest, now time.Duration, res limitResult) {
		if m.noLimit {
			return
		}
		l := ls[r.client]
		l.release(when(t0.Add(now)), now-r.sent, res)
		w := waiters[r.client]
		for len(w) > 0 && l.tryAcquire(CriticalityDefault) {
			wr := w[0]
			w = w[1:]
			wr.waiting = false
			dispatch(wr, now, int(now/time.Second))
		}
		waiters[r.client] = w
	}
	// send makes an attempt of r at now, if its client's limit admits it.
	send := func(r *simRequest, now time.Duration, sec int) bool {
		if !m.noLimit && !ls[r.client].tryAcquire(CriticalityDefault) {
			return false
		}
		dispatch(r, now, sec)
		return true
	}
	// dispatch sends r, which holds a permit, to the server.
	dispatch = func(r *simRequest, now time.Duration, sec int) {
		r.sent, r.answered, r.rejected = now, false, false
		r.tries++
		res.arrivals[sec]++
		push(simEvent{at: now + m.deadline, kind: 2, req: r})
		if (m.overload != nil && m.overload(now)) || (m.queue > 0 && len(fifo) >= m.queue) {
			r.rejected = true
			push(simEvent{at: now + time.Millisecond, kind: 1, req: r})
			return
		}
		fifo = append(fifo, r)
		start(now)
	}
	// failed retries r at once (as a fresh attempt object, the old one
	// may still be at the server) if it has tries left.
	failed := func(r *simRequest, now time.Duration, sec int) {
		if r.tries > m.retries {
			return
		}
		nr := &simRequest{client: r.client, first: r.first, tries: r.tries}
		send(nr, now, sec)
	}
	push(simEvent{at: 0, kind: 0})
	lastSec := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		if e.at > m.length {
			break
		}
		now := e.at
		sec := int(now / time.Second)
		for ; lastSec < sec; lastSec++ {
			res.limits[lastSec] = ls[0].Limit()
		}
		switch e.kind {
		case 0:
			push(simEvent{at: now + gap(now), kind: 0})
			res.offered[sec]++
			r := &simRequest{client: rng.IntN(n), first: now}
			if send(r, now, sec) {
				continue
			}
			if l := ls[r.client]; m.wait && len(waiters[r.client]) < l.waitRoomLocked() {
				if d := l.maxWait(); d > 0 {
					r.waiting = true
					waiters[r.client] = append(waiters[r.client], r)
					push(simEvent{at: now + d, kind: 3, req: r})
					continue
				}
			}
			res.shed[sec]++
		case 1:
			r := e.req
			if !r.rejected {
				busy--
				start(now)
			}
			if r.answered {
				continue // its client gave up: served for nothing
			}
			r.answered = true
			if r.rejected {
				res.rejected[sec]++
				release(r, now, limitOverload)
				failed(r, now, sec)
				continue
			}
			res.good[sec]++
			res.goodBy[r.client][sec]++
			res.latencies = append(res.latencies, now-r.first)
			release(r, now, limitGood)
		case 3:
			if r := e.req; r.waiting {
				r.waiting = false
				w := waiters[r.client]
				for i, x := range w {
					if x == r {
						waiters[r.client] = append(w[:i:i], w[i+1:]...)
						break
					}
				}
				res.shed[sec]++
			}
		case 2:
			if r := e.req; !r.answered {
				r.answered = true
				release(r, now, limitOverload)
				failed(r, now, sec)
			}
		}
	}
	return res
}

// total adds xs[from:to].
func total(xs []int, from, to int) int {
	n := 0
	for _, x := range xs[from:to] {
		n += x
	}
	return n
}
