package resilience

import "fmt"

// Criticality orders calls under a concurrency limit: when the limit is
// reached, sheddable calls go first and critical ones last.
type Criticality int

// The criticalities, least critical first. The zero value is
// CriticalityDefault.
const (
	CriticalitySheddable Criticality = iota - 1 // shed once ⌈¾·limit⌉ are in flight; never waits
	CriticalityDefault                          // up to the limit; waits up to MaxWait
	CriticalityCritical                         // up to the limit; waits ahead of the default ones, displacing one from a full queue
)

// String returns "sheddable", "default" or "critical".
func (c Criticality) String() string {
	switch c {
	case CriticalitySheddable:
		return "sheddable"
	case CriticalityDefault:
		return "default"
	case CriticalityCritical:
		return "critical"
	}
	return fmt.Sprintf("Criticality(%d)", int(c))
}

// limitQueue holds the first attempts waiting for a permit of one key's
// concurrency limit, most critical first and, within a criticality, in
// order of arrival. It is not safe for concurrent use (the limiter's mutex
// guards it).
type limitQueue struct {
	ws []*limitWaiter
}

// limitWaiter is an attempt waiting for a permit.
type limitWaiter struct {
	crit    Criticality
	ready   chan struct{} // closed when the waiter leaves the queue: granted or displaced
	granted bool          // set before ready is closed
}

func (q *limitQueue) len() int { return len(q.ws) }

// push adds w behind every waiter at least as critical. When the queue
// already holds capacity waiters, w takes the place of the newest of the
// least critical ones if that one is less critical than w, and push
// returns it (displaced: the caller sheds it); otherwise w is not queued
// and push returns w itself.
func (q *limitQueue) push(w *limitWaiter, capacity int) (out *limitWaiter) {
	if len(q.ws) >= capacity {
		if len(q.ws) == 0 || q.ws[len(q.ws)-1].crit >= w.crit {
			return w
		}
		last := q.ws[len(q.ws)-1] // the newest of the least critical
		q.ws = q.ws[:len(q.ws)-1]
		out = last
	}
	at := len(q.ws)
	for at > 0 && q.ws[at-1].crit < w.crit {
		at--
	}
	q.ws = append(q.ws, nil)
	copy(q.ws[at+1:], q.ws[at:])
	q.ws[at] = w
	return out
}

// head returns the first waiter, or nil.
func (q *limitQueue) head() *limitWaiter {
	if len(q.ws) == 0 {
		return nil
	}
	return q.ws[0]
}

// pop removes the first waiter.
func (q *limitQueue) pop() {
	q.ws[0] = nil
	q.ws = q.ws[1:]
}

// remove takes w out of the queue if it is there.
func (q *limitQueue) remove(w *limitWaiter) {
	for i, x := range q.ws {
		if x == w {
			copy(q.ws[i:], q.ws[i+1:])
			q.ws[len(q.ws)-1] = nil
			q.ws = q.ws[:len(q.ws)-1]
			return
		}
	}
}
