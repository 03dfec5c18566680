package resilience

import (
	"math"
	"time"
)

// The limit's algorithm: a pure update from one window's summary to the
// next limit, apart from the admission that counts permits (limit.go) and
// the queue of waiting attempts (limit_queue.go). The model is written on
// ConcurrencyLimit.

// The algorithm's constants, each with its reason. None of them is a
// count of attempts sized for one traffic shape: the window is set by the
// key's latency, the floors by what it delivers, the cuts by what is in
// flight.
const (
	// limitMinSamples: a window closes with at least this many results (or
	// after limitShortWindows times its span with fewer), and judges a
	// queue only from as many answers: three is the fewest whose fastest
	// one is not a single lucky answer. More would slow a client with a
	// small share of the downstream (a few answers per window) down to
	// reacting after the downstream's queue has grown past its deadline.
	limitMinSamples = 3
	// limitShortWindows: how many spans a window waits for limitMinSamples
	// before it closes with fewer, so a quiet key still learns.
	limitShortWindows = 4
	// limitMinWindow: the shortest window, for a key whose latency is
	// tiny: below this a window's count of results is noise from the
	// scheduler's time slice (tens of milliseconds on a loaded machine).
	limitMinWindow = 50 * time.Millisecond
	// limitWindowRTTs: a window lasts at least this many no-load latencies,
	// so the attempts it counts were sent and answered within it.
	limitWindowRTTs = 4
	// limitRateWindows: the delivery rate's peak is over this many windows:
	// long enough to remember the rate from before an overload, short
	// enough (well under a second at typical latencies) to forget a faster
	// past.
	limitRateWindows = 8
	// limitGain: the floor of an overload cut is this many times what the
	// downstream serves at once for this client without a queue, and the
	// limit below congestion this many times the most in flight lately:
	// room for a queue as long as what is served, so the downstream is
	// never idle waiting for this client, and never an unbounded one.
	limitGain = 2.0
	// limitHeadroom: added to the limit below congestion, so that at a
	// small share (one or two in flight) it still leaves room for a burst
	// of a few.
	limitHeadroom = 4
	// limitHighHalfLife: below congestion the limit follows twice the most
	// in flight lately, which halves over this time: long enough that a
	// steady load's rare burst (once in tens of seconds) finds the limit
	// where the last one left it, short enough that a key that got quieter
	// gives the permits back within a minute.
	limitHighHalfLife = 10 * time.Second
	// limitQueueRTT: a window whose fastest answer took over this multiple
	// of a typical window's fastest (and over the typical mean) shows a
	// queue at the downstream: the limit does not grow then. Half as much
	// again: below the 2× of a downstream at half its capacity with no
	// queue at all (at 2× a fleet cut to that level would double again at
	// once), above what a heavy tail's fastest answer in a window of a few
	// varies by.
	limitQueueRTT = 1.5
	// limitSlowStep: a window of a few slow answers that filled the limit
	// raises it by this many: the least step, so that a fleet of clients
	// each taking it adds no more than one attempt each per window to a
	// downstream that already has a queue.
	limitSlowStep = 1
	// limitDeepQueue: a window of a few slow answers that filled the
	// limit does not raise it when its fastest answer took over this many
	// no-load latencies: the downstream's queue is already several
	// answers deep, and every client of a fleet adding one attempt a
	// window refills it past its deadline (the simulation's 50 clients
	// through a halved capacity lost a tenth of it in timeouts after the
	// onset that way). Four: above the twice as long of a downstream
	// whose service time doubled with no queue at all, so clients cut to
	// different levels still come back toward equal shares there; below
	// the deadline of a few no-load latencies a client of such a fleet
	// sees its answers reach before its first timeout.
	limitDeepQueue = 4
	// limitCongestedLoad: overload answers over this share of a window's
	// results is overload: a healthy downstream sheds or times out far
	// fewer, while one in ten is already a tenth of the work lost.
	limitCongestedLoad = 0.1
	// limitMinOverload: and at least this many: one timeout among a
	// handful of answers is a heavy tail's, not an overload.
	limitMinOverload = 2
	// limitBackoff: an overloaded window sets the limit to at most this
	// share of the most attempts in flight in it: a multiplicative
	// decrease, which shares a downstream fairly between clients that back
	// off alike.
	limitBackoff = 0.8
	// limitMaxBackoff: the deepest cut one window makes; the share of
	// overload answers sets the cut between this and limitBackoff, so a
	// downstream that answers half its requests 503 gets half as many.
	limitMaxBackoff = 0.5
	// limitBaseStep: a window without congestion moves the no-load
	// latencies down at once but up only this share of the way toward its
	// own: an average over about 8 windows, so one slow window does not
	// redefine "no load".
	limitBaseStep = 8
	// limitFullWindow: a window of this many good answers moves the
	// no-load latencies the whole step; one of fewer, that share of it.
	limitFullWindow = 10
)

// limitWindow summarizes one window of results: the algorithm's input.
type limitWindow struct {
	elapsed  time.Duration // how long the window lasted
	good     int           // results that were answers, not overload answers
	overload int           // overload answers and per-attempt timeouts
	sum      time.Duration // the good results' latencies, summed
	peak     int           // the most attempts in flight at once
	filled   bool          // an attempt found the limit reached
	least    time.Duration // the least latency of a good result
}

// results is how many results the window counts.
func (w limitWindow) results() int { return w.good + w.overload }

// mean is the good results' mean latency (0 without any).
func (w limitWindow) mean() time.Duration {
	if w.good <= 0 || w.sum <= 0 {
		return 0
	}
	return w.sum / time.Duration(w.good)
}

// rate is the good results per second; 0 for a window with no length.
func (w limitWindow) rate() float64 {
	if w.elapsed <= 0 || w.good <= 0 {
		return 0
	}
	return float64(w.good) / w.elapsed.Seconds()
}

// limitAlgo is the state the algorithm keeps between windows: the
// estimates and the limit. It is not safe for concurrent use (the limiter
// holds its mutex).
type limitAlgo struct {
	cfg     *ConcurrencyLimit
	limit   int
	windows int64         // windows closed
	base    time.Duration // the no-load latency: a typical window's mean (0: none yet)
	least   time.Duration // a typical window's least latency (0: none yet)
	high    float64       // the most in flight lately (see limitHighHalfLife)
	cutLast bool          // the last window cut the limit on overload answers
	settled bool          // the key's start is over (see completeCold)
	rates   [limitRateWindows]float64
}

func newLimitAlgo(cfg *ConcurrencyLimit) limitAlgo {
	return limitAlgo{cfg: cfg, limit: cfg.InitialLimit}
}

// span is how long the current window lasts at least. A window in which
// an attempt found the limit reached (filled) closes sooner, after
// limitWindowRTTs no-load latencies, to learn while attempts wait; but
// never in no time, as it would while the no-load latency is unknown.
func (a *limitAlgo) span(filled bool) time.Duration {
	if filled && a.base > 0 {
		return limitWindowRTTs * a.base
	}
	return max(limitMinWindow, limitWindowRTTs*a.base)
}

// complete reports whether a window el long with n results should close.
func (a *limitAlgo) complete(el time.Duration, n int, filled bool) bool {
	span := a.span(filled)
	return n > 0 && el >= span && el > 0 && (n >= limitMinSamples || el >= limitShortWindows*span)
}

// completeCold reports whether window w, el long, of a key still in its
// start (no no-load latency yet, or only windows that filled the limit
// with fast answers since: a first burst) should close before complete
// says so: the limit filled and limitMinSamples good answers came back,
// over at least the fastest one's latency. Waiting for limitMinWindow, or
// for limitWindowRTTs latencies, would keep such a burst, as a new key's
// first traffic often is, at a limit set by configuration rather than by
// the key while it doubles, and shed what the downstream would have
// served; a window as long as its fastest answer has answers from
// attempts that were in flight together, so its rate is not the overflow
// of a window that lasted no time. The start ends at the first window
// that did not fill the limit, showed a queue or cut.
func (a *limitAlgo) completeCold(el time.Duration, w limitWindow, filled bool) bool {
	return (a.base == 0 || !a.settled) && filled && w.good >= limitMinSamples && w.least > 0 && el >= w.least
}

// completeOverloaded reports whether window w, el long, should close at
// once on its overload answers: it holds limitMinOverload of them, more
// than limitCongestedLoad of the results a whole window brings at the
// key's delivery rate (or of those it has, if more), and the window
// before it did not cut. A client with a small share of a downstream sees
// a few results per window, and the window waiting out its span and its
// limitMinSamples let the downstream's queue of attempts that will time
// out grow for a span more; one with a large share needs as many overload
// answers as would make its whole window overloaded, so closing early
// changes when it cuts, not whether. Not right after a cut: the answers
// then are to attempts sent before it, and cutting again on them would
// cut twice for one overload.
func (a *limitAlgo) completeOverloaded(el time.Duration, w limitWindow, filled bool) bool {
	if el <= 0 || w.overload < limitMinOverload || a.cutLast {
		return false
	}
	expect := max(a.rate()*a.span(filled).Seconds(), float64(w.results()))
	return float64(w.overload) > limitCongestedLoad*expect
}

// rate is the delivery rate: the most good results per second over the
// last limitRateWindows windows.
func (a *limitAlgo) rate() float64 {
	var rate float64
	for _, r := range a.rates {
		rate = max(rate, r)
	}
	return rate
}

// toLimit converts a limit computed in floating point to an int within
// [MinLimit, MaxLimit], rounding up; NaN gives MinLimit.
func (a *limitAlgo) toLimit(x float64) int {
	lo, hi := a.cfg.MinLimit, a.cfg.MaxLimit
	switch {
	case math.IsNaN(x) || x <= float64(lo):
		return lo
	case x >= float64(hi):
		return hi
	}
	return int(math.Ceil(x))
}

// next updates the estimates with window w and returns the next limit.
func (a *limitAlgo) next(w limitWindow) int {
	a.recordRate(w)
	sig := a.judge(w)
	if mean := w.mean(); mean > 0 && !sig.queued && !sig.overloaded {
		a.learn(w, mean)
	}
	rate := a.rate()
	// The most in flight lately, halving every limitHighHalfLife.
	a.high *= math.Exp2(-max(w.elapsed.Seconds(), 0) / limitHighHalfLife.Seconds())
	a.high = max(a.high, float64(w.peak))
	// What the downstream serves at once for this client, by Little's law:
	// its delivery rate times its no-load latency. Twice that is the
	// floor an overload cut stops at: for a client with a small share of
	// the downstream it is a small number, whatever InitialLimit says.
	est := rate * a.base.Seconds()
	floor := a.cfg.MinLimit // nothing good came back: as low as allowed
	if est > 0 {
		floor = a.toLimit(limitGain * est)
	}
	a.cutLast = sig.overloaded
	if !w.filled || sig.overloaded || sig.queued {
		a.settled = true
	}
	a.limit = min(max(a.step(w, sig, floor), a.cfg.MinLimit), a.cfg.MaxLimit)
	return a.limit
}

// recordRate keeps window w's delivery rate among the last
// limitRateWindows.
func (a *limitAlgo) recordRate(w limitWindow) {
	a.windows++
	i := a.windows % limitRateWindows
	a.rates[i] = w.rate()
	if span := a.span(w.filled); w.elapsed > 0 && w.elapsed < span {
		// A window that closed early (completeCold, completeOverloaded)
		// is a rate over its span: a good answer or two in a few
		// milliseconds is not the key's rate, and the floor of a cut
		// would follow it up.
		a.rates[i] = float64(w.good) / span.Seconds()
	}
}

// windowSignals is what a window says of the downstream (see judge).
type windowSignals struct {
	slow, queued, few, overloaded bool
}

// judge reads window w against the key's estimates.
func (a *limitAlgo) judge(w limitWindow) windowSignals {
	n := w.results()
	// A queue at the downstream (this client's or a fleet's) shows as a
	// window whose fastest answer was slow: over 1.5 times a typical window's
	// fastest, and over the typical mean. The fastest, not the mean, so
	// that a heavy tail's slow answers are not a queue. A window of fewer
	// than limitMinSamples good answers cannot tell (its fastest may be one
	// unlucky answer): it is slow, not queued.
	queueAbove := max(limitQueueRTT*float64(a.least), float64(a.base))
	slow := a.least > 0 && w.good > 0 && float64(w.least) > queueAbove
	return windowSignals{
		slow:   slow,
		queued: slow && w.good >= limitMinSamples,
		// A window of fewer than limitMinSamples good answers with an
		// overload answer among them is too few to be an overload, and
		// too few to grow on.
		few: w.good < limitMinSamples && w.overload > 0,
		// Overload answers (503, 429, per-attempt timeouts) over a tenth
		// of the results, and at least two (one in a handful of answers
		// is a heavy tail's, not an overload).
		overloaded: w.overload >= limitMinOverload && float64(w.overload) > limitCongestedLoad*float64(n),
	}
}

// step returns the limit after window w, which said sig, before it is
// clamped to [MinLimit, MaxLimit]; floor is where an overload cut stops.
func (a *limitAlgo) step(w limitWindow, sig windowSignals, floor int) int {
	lim := a.limit
	grows := w.filled && w.good > 0 && !sig.few
	switch {
	case sig.overloaded:
		// An overload answer is a signal in its own right, whatever the
		// latency: back off at once, from what is in use rather than from
		// the limit (a client with a small share of the downstream uses far
		// less than its limit), by the share of overload answers, between
		// limitMaxBackoff and limitBackoff.
		cut := max(limitMaxBackoff, min(limitBackoff, 1-float64(w.overload)/float64(w.results())))
		return min(lim, max(floor, a.toLimit(cut*float64(min(lim, w.peak)))))
	case sig.queued:
		// A queue but answers in time: hold; growing would lengthen it.
		return lim
	case grows && sig.slow && float64(w.least) > limitDeepQueue*float64(a.base):
		// At the limit with a few answers, the fastest of them queued for
		// several no-load latencies: hold (Vegas's rule: no increase while
		// the queue is long), as for a window that shows a queue.
		return lim
	case grows && sig.slow:
		// At the limit with a few answers, all slow: a client with a
		// small share of a downstream that has a queue, or a slow answer
		// or two. Grow by a step, not twice: doubling refilled a shared
		// downstream's queue faster than its timeouts cut it, holding
		// kept a client cut to one in flight there while others held
		// more; a step, the same for every client, brings clients that
		// were cut to different levels toward equal shares (additive
		// increase, as in TCP's congestion avoidance).
		return lim + limitSlowStep
	case grows:
		// At the limit with answers and no queue: room to grow, twice as
		// much per window, so a key that got busier finds its level
		// within a few windows. (A queue shows in the next window, an
		// overload in the one after: the next window holds or cuts.)
		return max(2*lim, floor)
	case w.filled: // at the limit with nothing (or too few) to learn from: hold
		return lim
	}
	// Below the limit: it comes down toward what is used, twice the most
	// in flight lately plus headroom for a burst, but not below
	// InitialLimit; it never goes up here (after an overload cut, only
	// windows that fill the limit raise it, so a fleet that backed off
	// does not return all at once).
	return min(lim, max(a.toLimit(limitGain*a.high)+limitHeadroom, floor+limitHeadroom, a.cfg.InitialLimit))
}

// learn moves the no-load latencies toward window w's (of mean latency
// mean), a window without congestion: down at once, up by an eighth, each
// in proportion to how many answers the window has, so a window of a few
// answers moves them little.
func (a *limitAlgo) learn(w limitWindow, mean time.Duration) {
	weight := min(1, float64(w.good)/limitFullWindow)
	step := func(est *time.Duration, x time.Duration) {
		switch {
		case *est == 0:
			*est = x
		case x < *est:
			*est -= time.Duration(weight * float64(*est-x))
		case !w.filled:
			*est += time.Duration(weight * float64(x-*est) / limitBaseStep)
		}
	}
	step(&a.base, mean)
	// The least latency is a window's minimum, noisy when a window has a
	// few answers: its no-load value is their average (an eighth of the
	// way either way), not their own minimum, so that a window is slow
	// only when its fastest answer is twice as slow as a typical window's.
	if a.least == 0 {
		a.least = w.least
	} else {
		a.least += time.Duration(weight * float64(w.least-a.least) / limitBaseStep)
	}
}
