package resilience

import (
	"math"
	"time"
)

// The limit's algorithm: a pure update from one window's summary to the
// next limit, apart from the admission that counts permits (limit.go) and
// the queue of waiting attempts (limit_queue.go). The model is written on
// ConcurrencyLimit.

// The algorithm's constants, each with its reason.
const (
	// limitMinSamples: a window closes with at least this many results (or
	// after limitShortWindows times its span), so that its mean latency is
	// not one answer's: with 10 samples a mean's noise is about a third of
	// one sample's.
	limitMinSamples = 10
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
	// long enough to remember the rate from before a stall, short enough
	// (a few hundred ms at typical latencies) to forget a faster past.
	limitRateWindows = 8
	// limitProbeEvery: windows between probes, so a probe (which holds the
	// limit at the estimate) costs at most a tenth of the time.
	limitProbeEvery = 10
	// limitProbeAfter: windows in a row congested by latency before a
	// probe: one or two may be a burst; three are a downstream that got
	// slower or a queue of this client's own.
	limitProbeAfter = 3
	// limitHotWindows: congested windows in a row before the limit drops:
	// one alone may be a pause of this process (a GC, a descheduled
	// thread) that made every answer in flight late at once.
	limitHotWindows = 2
	// limitGain: the target is this many times what the downstream serves
	// at once, so a downstream at capacity holds a queue about as long as
	// what it serves (it is never idle waiting for this client) and never
	// an unbounded one.
	limitGain = 2.0
	// limitHeadroom: added to the target and to the peak in flight, so
	// that at a small estimate (one or two in flight) the limit still
	// leaves room for a burst of a few.
	limitHeadroom = 4
	// limitCongestedRTT: a mean latency over this multiple of the no-load
	// latency, in a window that filled the limit, is this client's queue at
	// the downstream: at limitGain the queue doubles the latency.
	limitCongestedRTT = limitGain
	// limitClearRTT: a mean latency up to this multiple of the no-load
	// latency shows no queue: halfway between none and congestion.
	limitClearRTT = (1 + limitCongestedRTT) / 2
	// limitCongestedLoad: overload answers over this share of a window's
	// results is congestion: a healthy downstream sheds or times out far
	// fewer, while one in ten is already a tenth of the work retried.
	limitCongestedLoad = 0.1
	// limitBaseStep: a window that did not fill the limit moves the no-load
	// latency this share of the way toward its mean: an average over about
	// 8 windows, so one slow window does not redefine "no load".
	limitBaseStep = 8
	// limitGrowStep: a window that filled the limit while some queue shows
	// raises it by this fraction: gently, since the queue is near.
	limitGrowStep = 8
)

// limitWindow summarizes one window of results: the algorithm's input.
type limitWindow struct {
	elapsed  time.Duration // how long the window lasted
	good     int           // results that were answers, not overload answers
	overload int           // overload answers and per-attempt timeouts
	sum      time.Duration // the good results' latencies, summed
	peak     int           // the most attempts in flight at once
	filled   bool          // an attempt found the limit reached
	// During a probe: the good results of attempts sent since it began.
	probeN   int
	probeSum time.Duration
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
	base    time.Duration // the no-load latency (0: none yet)
	rates   [limitRateWindows]float64
	peaks   [limitRateWindows]int
	probing bool  // the current window is a probe
	probeAt int64 // the window that last ended a probe
	hot     int   // consecutive congested windows
	slowRun int   // consecutive windows congested by latency
}

func newLimitAlgo(cfg *ConcurrencyLimit) limitAlgo {
	return limitAlgo{cfg: cfg, limit: cfg.InitialLimit}
}

// span is how long the current window lasts at least. A window in which
// an attempt found the limit reached (filled) closes sooner, after
// limitWindowRTTs no-load latencies, to learn while attempts wait; but
// never in no time, as it would while the no-load latency is unknown. A
// probe lasts twice as long: time for the downstream's queue to drain,
// then for samples.
func (a *limitAlgo) span(filled bool) time.Duration {
	d := max(limitMinWindow, limitWindowRTTs*a.base)
	if filled && !a.probing && a.base > 0 {
		d = limitWindowRTTs * a.base
	}
	if a.probing {
		d *= 2
	}
	return d
}

// complete reports whether a window el long with n results should close.
func (a *limitAlgo) complete(el time.Duration, n int, filled bool) bool {
	span := a.span(filled)
	return n > 0 && el >= span && el > 0 && (n >= limitMinSamples || el >= limitShortWindows*span)
}

// streak returns run+1 when on is set, else 0.
func streak(run int, on bool) int {
	if on {
		return run + 1
	}
	return 0
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
	a.windows++
	i := a.windows % limitRateWindows
	a.rates[i], a.peaks[i] = w.rate(), w.peak
	probed := a.probing
	a.probing = false
	mean := w.mean()
	switch {
	case mean == 0:
	case probed && w.probeN > 0 && w.probeSum > 0:
		// At most doubled per probe: a probe's first attempts may still
		// meet some of the queue it is draining.
		a.base = min(w.probeSum/time.Duration(w.probeN), 2*a.base)
	case a.base == 0 || mean < a.base:
		a.base = mean
	case !w.filled:
		a.base += (mean - a.base) / limitBaseStep
	}
	if probed {
		a.probeAt = a.windows
	}
	var rate float64
	peak := 0
	for i, r := range a.rates {
		rate, peak = max(rate, r), max(peak, a.peaks[i])
	}
	cfg := a.cfg
	est := rate * a.base.Seconds() // what the downstream serves at once
	target := a.toLimit(limitGain*est + limitHeadroom)
	if est <= 0 {
		target = cfg.MinLimit // nothing good came back: as low as allowed
	}
	lim := a.limit
	// Latency counts as congestion only in a window that filled the limit:
	// below it, a slower downstream is not this client's doing.
	slow := w.filled && mean > 0 && a.base > 0 && float64(mean) > limitCongestedRTT*float64(a.base)
	n := w.results()
	congested := slow || n > 0 && float64(w.overload) > limitCongestedLoad*float64(n)
	a.hot, a.slowRun = streak(a.hot, congested), streak(a.slowRun, slow)
	switch {
	case a.slowRun >= limitProbeAfter && !probed && a.windows-a.probeAt >= limitProbeEvery && est > 0:
		// Probe: hold the limit at the estimate for the next window.
		a.probing = true
		lim = a.toLimit(est)
	case congested && a.hot >= limitHotWindows:
		lim = min(lim, target)
	case congested: // one window may be a stall: wait for the next
	case w.filled && float64(mean) <= limitClearRTT*float64(a.base):
		lim = max(target, 2*lim) // no sign of a queue: room to grow
	case w.filled:
		lim = max(target, lim+max(lim/limitGrowStep, 1)) // some queueing already: gently
	default:
		lim = max(target, min(lim, 2*peak+limitHeadroom), cfg.InitialLimit)
	}
	a.limit = min(max(lim, cfg.MinLimit), cfg.MaxLimit)
	return a.limit
}
