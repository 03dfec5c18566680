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
// each with a deadline. Time is simulated, so the limit's dynamics are
// tested exactly, whatever the machine is doing.

// overloadModel configures one run of the model.
type overloadModel struct {
	workers  int
	service  time.Duration // per request, outside the drop
	load     float64       // offered share of the capacity outside the drop
	deadline time.Duration // each request's; a later answer is not good
	dropAt   time.Duration // when the service time is multiplied by dropBy
	dropFor  time.Duration
	dropBy   float64
	sigma    float64                    // service times are lognormal with this sigma around service (0: fixed)
	length   time.Duration              // of the whole run
	overload func(t time.Duration) bool // the server answers 503 at once (nil: never)
	seed     uint64
	limit    ConcurrencyLimit
	noLimit  bool // a client with no limit, for comparison
}

// overloadResult is per second of the run.
type overloadResult struct {
	good     []int // answered within the deadline
	shed     []int // refused by the limit
	arrivals []int // reached the server
	offered  []int
	limits   []int // the limit at the end of each second
}

type simEvent struct {
	at   time.Duration
	kind int // 0 arrival, 1 server done, 2 client deadline
	req  *simRequest
}

type simRequest struct {
	sent     time.Duration
	answered bool // the client has its result (or gave up)
	rejected bool // the server answered 503
}

type simEvents []simEvent

func (q simEvents) Len() int           { return len(q) }
func (q simEvents) Less(i, j int) bool { return q[i].at < q[j].at }
func (q simEvents) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simEvents) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *simEvents) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// run simulates m and returns its per-second counts.
func (m overloadModel) run() overloadResult {
	cfg := m.limit.withDefaults()
	cfg.MaxWait = -1 // the model sheds at once: it has no waiting clients
	l := newLimiter(&cfg)
	rng := rand.New(rand.NewPCG(m.seed, 1))
	secs := int(m.length/time.Second) + 1
	res := overloadResult{good: make([]int, secs), shed: make([]int, secs), arrivals: make([]int, secs),
		offered: make([]int, secs), limits: make([]int, secs)}
	capacity := float64(m.workers) / m.service.Seconds()
	rate := m.load * capacity
	// A lognormal of median service·e^(-σ²/2) has mean service, so the
	// capacity is the same whatever σ.
	svc := func(t time.Duration) time.Duration {
		d := float64(m.service)
		if t >= m.dropAt && t < m.dropAt+m.dropFor {
			d *= m.dropBy
		}
		if m.sigma > 0 {
			d *= math.Exp(m.sigma*rng.NormFloat64() - m.sigma*m.sigma/2)
		}
		return time.Duration(d)
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
			res.limits[lastSec] = l.Limit()
		}
		switch e.kind {
		case 0:
			push(simEvent{at: now + time.Duration(rng.ExpFloat64()/rate*float64(time.Second)), kind: 0})
			res.offered[sec]++
			if !m.noLimit && !l.tryAcquire(CriticalityDefault) {
				res.shed[sec]++
				continue
			}
			r := &simRequest{sent: now}
			res.arrivals[sec]++
			push(simEvent{at: now + m.deadline, kind: 2, req: r})
			if m.overload != nil && m.overload(now) {
				r.rejected = true
				push(simEvent{at: now + time.Millisecond, kind: 1, req: r})
				continue
			}
			fifo = append(fifo, r)
			start(now)
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
				if !m.noLimit {
					l.release(t0.Add(now), now-r.sent, limitOverload)
				}
				continue
			}
			res.good[sec]++
			if !m.noLimit {
				l.release(t0.Add(now), now-r.sent, limitGood)
			}
		case 2:
			if r := e.req; !r.answered {
				r.answered = true
				if !m.noLimit {
					l.release(t0.Add(now), now-r.sent, limitOverload)
				}
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
