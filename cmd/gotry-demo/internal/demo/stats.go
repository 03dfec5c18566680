package demo

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// numReasons bounds the EndReason values counted; later ones share the last
// slot.
const numReasons = 16

// stats counts what the transport does, from its hooks. The counters are
// atomics; the breaker map has its own mutex. Safe for concurrent use.
type stats struct {
	requests, attempts        atomic.Int64
	retries, hedges           atomic.Int64
	hedgeWins                 atomic.Int64
	budgetRefusals            atomic.Int64
	breakerRejects            atomic.Int64
	retryAfter                atomic.Int64 // retries whose delay came from Retry-After
	timeouts                  atomic.Int64 // attempts that hit the per-attempt timeout
	skipped                   atomic.Int64 // requests the pacer dropped: every worker busy
	clientErrors, nonOKStatus atomic.Int64 // final results: an error, or a status >= 400
	reasons                   [numReasons]atomic.Int64
	latency                   latencyWindow
	shed                      [3]atomic.Int64 // attempts the concurrency limit refused, by kind
	limitWaits                atomic.Int64    // first attempts that waited for a permit and got one
	// ok counts, for each host under the concurrency limit, the requests
	// answered with a status < 400: the goodput the limit keeps. Built
	// by newStats and only read after.
	ok map[string]*atomic.Int64

	// maxAttempts is the most attempts one request took.
	maxAttempts atomic.Int64

	mu       sync.Mutex // guards breakers
	breakers map[string]*breakerTrack
}

// breakerTrack is one host's breaker as the demo saw it.
type breakerTrack struct {
	state         resilience.BreakerState
	since         time.Time
	opens, closes int
}

// newStats returns empty stats that count the goodput of limitHosts.
func newStats(limitHosts []string) *stats {
	s := &stats{breakers: map[string]*breakerTrack{}, ok: map[string]*atomic.Int64{}}
	for _, h := range limitHosts {
		s.ok[h] = new(atomic.Int64)
	}
	return s
}

// okFor returns how many of host's requests were answered with a status
// < 400 (0 for a host not under the limit).
func (s *stats) okFor(host string) int64 {
	if n := s.ok[host]; n != nil {
		return n.Load()
	}
	return 0
}

// hooks returns the transport hooks that feed s. They are cheap: atomics,
// plus one mutex for latency and breaker changes.
func (s *stats) hooks() transport.Hooks {
	return transport.Hooks{
		OnAttemptStart: func(ctx context.Context, _ resilience.AttemptStartEvent) context.Context {
			s.attempts.Add(1)
			return ctx
		},
		OnAttemptEnd: func(e resilience.AttemptEndEvent) {
			if e.Kind == resilience.KindHedge && e.Outcome == resilience.AttemptSuccess {
				s.hedgeWins.Add(1)
			}
			if e.Err != nil && errors.Is(e.Err, transport.ErrAttemptTimeout) {
				s.timeouts.Add(1)
			}
		},
		OnRetry: func(e resilience.RetryEvent) {
			s.retries.Add(1)
			if e.FromRetryAfter {
				s.retryAfter.Add(1)
			}
		},
		OnHedge:           func(resilience.HedgeEvent) { s.hedges.Add(1) },
		OnBudgetExhausted: func(resilience.BudgetEvent) { s.budgetRefusals.Add(1) },
		OnShed: func(e resilience.ShedEvent) {
			if int(e.Kind) >= 0 && int(e.Kind) < len(s.shed) {
				s.shed[e.Kind].Add(1)
			}
		},
		OnLimitWait:     func(resilience.LimitWaitEvent) { s.limitWaits.Add(1) },
		OnBreakerReject: func(resilience.BreakerRejectEvent) { s.breakerRejects.Add(1) },
		OnBreakerStateChange: func(e resilience.BreakerStateEvent) {
			s.observeBreaker(e.Key, e.To, time.Now())
		},
		OnCallEnd: func(e resilience.CallEndEvent) {
			s.requests.Add(1)
			s.reasons[min(int(e.Reason), numReasons-1)].Add(1)
			switch {
			case e.Err != nil:
				s.clientErrors.Add(1)
			case e.Code >= 400:
				s.nonOKStatus.Add(1)
			default:
				if n := s.ok[e.Key]; n != nil {
					n.Add(1)
				}
			}
			for {
				m := s.maxAttempts.Load()
				if int64(e.Attempts) <= m || s.maxAttempts.CompareAndSwap(m, int64(e.Attempts)) {
					break
				}
			}
			s.latency.add(e.Start.Add(e.Duration), e.Duration)
		},
	}
}

// observeBreaker records host's breaker in state st at now, from a hook or
// from polling (the breaker moves from open to half-open lazily, when asked).
func (s *stats) observeBreaker(host string, st resilience.BreakerState, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.breakers[host]
	if !ok {
		b = &breakerTrack{state: resilience.BreakerClosed, since: now}
		s.breakers[host] = b
	}
	if b.state == st {
		return
	}
	switch st {
	case resilience.BreakerOpen:
		b.opens++
	case resilience.BreakerClosed:
		b.closes++
	}
	b.state, b.since = st, now
}

// BreakerRow is one host's breaker as the demo saw it: its state, how long
// it has been in it, and how often it opened and closed.
type BreakerRow struct {
	Host          string
	State         resilience.BreakerState
	Since         time.Duration // time in state
	Opens, Closes int
}

// breakerRows returns hosts in order (plus any other tracked host), each
// with its state and time in state at now.
func (s *stats) breakerRows(hosts []string, now time.Time) []BreakerRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var out []BreakerRow
	add := func(h string) {
		if seen[h] {
			return
		}
		seen[h] = true
		b, ok := s.breakers[h]
		if !ok {
			out = append(out, BreakerRow{Host: h})
			return
		}
		out = append(out, BreakerRow{Host: h, State: b.state, Since: now.Sub(b.since), Opens: b.opens, Closes: b.closes})
	}
	for _, h := range hosts {
		add(h)
	}
	var rest []string
	for h := range s.breakers {
		if !seen[h] {
			rest = append(rest, h)
		}
	}
	sort.Strings(rest)
	for _, h := range rest {
		add(h)
	}
	return out
}

// LimitRow is one host under the concurrency limit at one moment: its limit
// and the attempts in flight under it (from the transport's Stats), the
// attempts it shed so far, the requests answered ok so far, and whether the
// upstream's capacity drop is on now.
type LimitRow struct {
	Host            string
	Limit, InFlight int
	Shed, OK        int64
	DropNow         bool
}

// Counters are the demo's totals at one moment, from the transport's hooks:
// requests finished, attempts started, retries scheduled, hedges launched
// and won, budget refusals, breaker rejections, retries that waited for
// Retry-After, attempts cut by the per-attempt timeout, requests skipped
// because every worker was busy, requests that ended in an error or a status
// >= 400, the most attempts one request took, attempts the concurrency
// limit shed by kind and first attempts that waited for a permit, and
// give-ups by reason (resilience.EndReason's String).
type Counters struct {
	Requests, Attempts, Retries, Hedges, HedgeWins int64
	BudgetRefusals, BreakerRejects, RetryAfter     int64
	Timeouts, Skipped, ClientErrors, NonOKStatus   int64
	MaxAttempts                                    int64
	ShedInitial, ShedRetry, ShedHedge, LimitWaits  int64
	Reasons                                        map[string]int64
}

func (s *stats) snapshot() Counters {
	c := Counters{
		Requests: s.requests.Load(), Attempts: s.attempts.Load(), Retries: s.retries.Load(),
		Hedges: s.hedges.Load(), HedgeWins: s.hedgeWins.Load(), BudgetRefusals: s.budgetRefusals.Load(),
		BreakerRejects: s.breakerRejects.Load(), RetryAfter: s.retryAfter.Load(), Timeouts: s.timeouts.Load(),
		Skipped: s.skipped.Load(), ClientErrors: s.clientErrors.Load(), NonOKStatus: s.nonOKStatus.Load(),
		MaxAttempts: s.maxAttempts.Load(), Reasons: map[string]int64{},
		ShedInitial: s.shed[resilience.KindInitial].Load(), ShedRetry: s.shed[resilience.KindRetry].Load(),
		ShedHedge: s.shed[resilience.KindHedge].Load(), LimitWaits: s.limitWaits.Load(),
	}
	for i := range s.reasons {
		r := resilience.EndReason(i)
		if n := s.reasons[i].Load(); n > 0 && r.GaveUp() {
			c.Reasons[r.String()] = n
		}
	}
	return c
}

// giveUps sums the give-up reasons.
func (c Counters) giveUps() int64 {
	var n int64
	for _, v := range c.Reasons {
		n += v
	}
	return n
}
