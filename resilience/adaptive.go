package resilience

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// AdaptiveHedging configures hedges whose delay is learned per key (per
// host, for the transport) instead of fixed: the caller states how much
// extra load it accepts, and a hedge is sent after a delay learned from the
// key's recent latencies that keeps the load below it.
//
// The model, per key:
//
//   - Every call's first attempt's time to its result (for HTTP, to the
//     response headers; a first attempt that lost to a hedge, whose latency
//     is known only to exceed the time it ran, at 1.5 × that time) goes into
//     a sliding-window latency histogram
//     (AdaptiveWindow long, in four rotating quarters; log-linear buckets,
//     eight per power of two, from 16µs to 34s). Recording is one atomic add:
//     no lock, no allocation.
//   - The delay is read from the newest quarters that together hold at
//     least 10 / MaxExtraLoad results (200 at 5%), or from the whole window
//     if it holds fewer: under steady traffic it follows the last quarter or
//     two, so a shift in latency shows within seconds.
//   - It aims at the (1 − 0.95 × MaxExtraLoad) percentile (the p95.25 at
//     5%), interpolated linearly within its bucket: close to what the cap
//     pays for, since the bucket below has room for the calls that come in
//     clusters.
//   - A gap overrides the aim: if, from the (1 − 1.2 × MaxExtraLoad)
//     percentile's bucket up to two buckets above the aim's, some bucket is
//     followed by three buckets (a factor of 1.30 in latency) that together
//     hold at most ⌊MaxExtraLoad × n / 16⌋ of the n results read, the delay
//     is the upper bound of the lowest such bucket: where the latency
//     density falls off and the tail starts. Hedging from there costs at
//     most 1.2 × MaxExtraLoad of the calls (the bucket holds the load to
//     the cap) and takes every call beyond the gap early. With a fast band
//     and a distinct slow one whose share is about the cap, the delay so
//     stays just above the fast band, where the percentile alone would jump
//     between the two bands as the slow share in the window moves around
//     the cap. (At 1.5 × the cap, as before, sparse jitter above the fast
//     band passed for a gap that the cap could not pay for.) When the
//     bucket is empty while far more calls want a hedge than the cap pays
//     for (over twice its share since the last computation, as when the
//     latency shifts), the search starts at the aim's bucket; after a burst
//     that merely drained the bucket, it does not, so the delay stays above
//     the fast band instead of jumping into the slow one.
//   - The delay is clamped to [MinDelay, MaxDelay] and recomputed at most
//     every 100ms once the key is warm.
//   - A cold key (fewer than AdaptiveMinSamples results in the window) is
//     recomputed at every call: with fewer than 4 results its delay is
//     MaxDelay when set, otherwise AdaptiveColdDelay; from 4 results on,
//     1.5 × the upper bound of the bucket of their p90 (of the slowest,
//     below 10 results), at most that cold delay. The starting credit pays
//     for these early hedges; with the slowest result alone as the delay,
//     the stalls among a key's first 50 calls that were faster than the
//     slowest seen went unhedged, and they set the p99.9 of a short run.
//     A call that finds the key's first computation under way uses the cold
//     delay too: no delay is ever below MinDelay or 0 for want of results.
//   - A hard cap holds whatever the estimate says: a token bucket per key
//     into which every call pays MaxExtraLoad tokens and every hedge takes
//     one (a hedge the budget or the breaker then refuses gives it back,
//     never past the capacity). Like a token bucket's burst, a new key
//     starts with a stated credit C (StartingCredit: by default the tokens
//     of 400 calls, 20 hedges at 5%), so the slow calls of its first
//     seconds are hedged before its calls have paid for them; that credit
//     is the whole price of the cold start. The capacity is the tokens of
//     a second of the key's calls at their rate over the window (counted
//     from the key's first call), at least C and at most the tokens of
//     1,000 calls (unless C is more); it follows the rate at each
//     computation (tokens above a lowered capacity are cut to it). So the
//     credit saved while few calls want a hedge pays for a burst of slow
//     calls a second's worth of calls later, instead of being thrown away.
//     The bounds, refused hedges included: from a key's first call on,
//     its hedges never exceed MaxExtraLoad × its calls + C (at 5%, 6% of a
//     new key's first 2,000 calls, 5.2% of its first 10,000); over any
//     interval, MaxExtraLoad × the calls in it + the capacity at its
//     start, at most the larger of C and the tokens of 1,000 calls, so
//     over any 10,000 calls of a warm key at most 1.1 × MaxExtraLoad of
//     them (5.5% at 5%: the cap plus half a point), whatever the call
//     rate. A sudden shift in latency cannot turn every call into two
//     while the estimate catches up. Hedges also still count against
//     MaxAttempts and spend the retry budget.
//
// The per-key state is about 3 KiB, made on a key's first adaptive call;
// the keys are the engine's (Settings.MaxKeys bounds them). Zero fields
// take their defaults: AdaptiveHedging{} is the defaults.
type AdaptiveHedging struct {
	// MaxExtraLoad is the fraction of calls that may get a hedge, in
	// (0, 1): 0.05 sends at most one hedge per 20 calls. Default
	// DefaultMaxExtraLoad.
	MaxExtraLoad float64
	// MinDelay and MaxDelay clamp the learned delay; 0 means no bound
	// (MinDelay) or AdaptiveColdDelay for a cold key (MaxDelay).
	MinDelay, MaxDelay time.Duration
	// StartingCredit is C, the hedges a new key may send before its calls
	// have paid for them: the bucket's first tokens, so that from a key's
	// first call on its hedges never exceed MaxExtraLoad × its calls + C.
	// 0 means the default, the tokens of 400 calls (MaxExtraLoad × 400,
	// rounded up: 20 at 5%, 40 at 10%; at least 2).
	StartingCredit int
}

// Adaptive hedging constants; see AdaptiveHedging.
const (
	AdaptiveWindow     = 10 * time.Second
	AdaptiveMinSamples = 50
	AdaptiveColdDelay  = time.Second
)

const (
	latSubBits  = 3 // 8 buckets per power of two
	latSub      = 1 << latSubBits
	latMinExp   = 14 // the first octave starts at 2^14 ns ≈ 16µs
	latMaxExp   = 34 // the last ends at 2^35 ns ≈ 34s
	latBuckets  = (latMaxExp - latMinExp + 1) * latSub
	latSlots    = 4 // the window's quarters
	latSlotSpan = int64(AdaptiveWindow / latSlots)
	refreshNs   = int64(100 * time.Millisecond) // how often a key's delay is recomputed
	creditCalls = 400                           // a new key's credit is, by default, the tokens of this many calls
	ceilCalls   = 1000                          // the bucket holds at most the tokens of this many calls (or the credit)
	creditSpan  = int64(time.Second)            // and otherwise the tokens of this long at the key's call rate
	surgeCalls  = 20                            // the demand for hedges is read over at least this many calls
	surgeShare  = 2                             // it surges when calls want this many times the cap's hedges

	// The delay estimate; see AdaptiveHedging.
	warmupSamples = 4   // from this many results on, a cold key hedges after coldFactor × their coldRank percentile
	coldRank      = 0.9 // (the slowest below 10 results)
	coldFactor    = 1.5
	tailSamples   = 10       // the estimate reads at least tailSamples / MaxExtraLoad results
	aimShare      = 0.95     // the delay aims at hedging this share of MaxExtraLoad, leaving the bucket headroom
	gapShare      = 1.2      // at a gap, it may go as low as hedging this share
	gapAbove      = 2        // a gap may also start this many buckets above the aim's (a factor of 1.19)
	gapBuckets    = 3        // a gap spans at least this many buckets (a factor of 2^(3/8) ≈ 1.30)
	gapMass       = 1.0 / 16 // and holds at most this share of MaxExtraLoad × the results
)

// inEffect returns c with its zero fields at their defaults.
func (c AdaptiveHedging) inEffect() AdaptiveHedging {
	if c.MaxExtraLoad == 0 {
		c.MaxExtraLoad = DefaultMaxExtraLoad
	}
	if c.StartingCredit == 0 {
		c.StartingCredit = int(c.credit())
	}
	return c
}

// Validate checks the configuration, naming the field it rejects.
func (c AdaptiveHedging) Validate() error {
	switch {
	case c.MaxExtraLoad != 0 && !(c.MaxExtraLoad > 0 && c.MaxExtraLoad < 1):
		return fmt.Errorf("resilience: AdaptiveHedging.MaxExtraLoad must be in (0, 1), or 0 for the default, got %v", c.MaxExtraLoad)
	case c.MinDelay < 0:
		return fmt.Errorf("resilience: AdaptiveHedging.MinDelay must not be negative, got %v", c.MinDelay)
	case c.MaxDelay < 0:
		return fmt.Errorf("resilience: AdaptiveHedging.MaxDelay must not be negative, got %v", c.MaxDelay)
	case c.MaxDelay > 0 && c.MinDelay > c.MaxDelay:
		return fmt.Errorf("resilience: AdaptiveHedging.MinDelay %v is above MaxDelay %v", c.MinDelay, c.MaxDelay)
	case c.StartingCredit < 0:
		return fmt.Errorf("resilience: AdaptiveHedging.StartingCredit must not be negative (0 means the default), got %d", c.StartingCredit)
	}
	return nil
}

// latBucket returns the histogram bucket of a latency of ns nanoseconds.
func latBucket(ns int64) int {
	if ns < 1<<latMinExp {
		return 0
	}
	e := bits.Len64(uint64(ns)) - 1
	if e > latMaxExp {
		return latBuckets - 1
	}
	sub := int(uint64(ns)>>(e-latSubBits)) & (latSub - 1)
	return (e-latMinExp)*latSub + sub
}

// latUpper returns the exclusive upper bound of bucket i, in nanoseconds.
func latUpper(i int) int64 {
	e := latMinExp + i/latSub
	sub := int64(i % latSub)
	return (latSub + sub + 1) << (e - latSubBits)
}

// latSlot is one quarter of the window: the counts of the results recorded
// during it. epoch numbers the quarter (nanoseconds / latSlotSpan, +1 so the
// zero value means unused).
type latSlot struct {
	epoch  atomic.Int64
	counts [latBuckets]atomic.Uint32
}

// hedgeKey is the adaptive state of one key.
type hedgeKey struct {
	cfg *AdaptiveHedging

	slots  [latSlots]latSlot
	rotate sync.Mutex // serialises the reset of a stale quarter

	// The cached delay and bucket capacity, recomputed at most every
	// refreshNs once warm, at every call before. Written under refresh
	// (TryLock: a reader never waits).
	refresh  sync.Mutex
	computed atomic.Int64 // when, in ns (0: never)
	delay    atomic.Int64 // ns
	warm     atomic.Bool
	capacity atomic.Uint64 // float64 bits
	born     atomic.Int64  // the first computation, in ns: the rate counts from here

	tokens atomic.Uint64 // float64 bits: the hedges the key may still launch

	// Calls and the hedges they wanted (granted or not) since the demand
	// was last read, and whether it then surged: far more calls wanted a
	// hedge than the cap pays for, as when the latency shifts.
	calls, wants atomic.Uint64
	surging      atomic.Bool
	capped       atomic.Uint64 // hedges the cap held back
}

// record adds one result's latency, observed at now.
func (h *hedgeKey) record(now time.Time, d time.Duration) {
	e := now.UnixNano()/latSlotSpan + 1
	s := &h.slots[e%latSlots]
	if s.epoch.Load() != e {
		h.rotate.Lock()
		if s.epoch.Load() != e { // stale: the quarter starts over
			for i := range s.counts {
				s.counts[i].Store(0)
			}
			s.epoch.Store(e)
		}
		h.rotate.Unlock()
	}
	s.counts[latBucket(int64(d))].Add(1)
}

// lostLatency is what a first attempt that lost to a hedge after running d
// goes into the histogram as: 1.5 × d. Its latency is known only to exceed
// d (at least the hedge delay plus the hedge's time). Recorded at d, the
// losers piled up just above the delay: the percentile read among them sat
// below the one of the real latencies and the delay drifted down, and a
// band of them just above the delay hid the gap there. At 1.5 × d they count
// above every delay up to d, as they should, and stay clear of the 1.30×
// that a gap spans.
func lostLatency(d time.Duration) time.Duration { return d + d/2 }

// estimate returns the hedge delay the window ending at now says, before
// clamping, and whether the window holds enough results for one. See
// AdaptiveHedging for the model.
func (h *hedgeKey) estimate(now time.Time) (time.Duration, bool) {
	load := h.cfg.MaxExtraLoad
	var counts [latBuckets]uint64
	n := h.recent(now, &counts, uint64(math.Ceil(tailSamples/load)))
	if n < AdaptiveMinSamples {
		if n < warmupSamples {
			return 0, false
		}
		// Warming up: well above most results so far, so it hedges the
		// calls far slower than most seen, paid by the starting credit.
		b, _ := atRank(&counts, n, coldRank)
		return min(time.Duration(coldFactor*float64(latUpper(b))), h.cfg.coldDelay()), false
	}
	aim, at := atRank(&counts, n, 1-aimShare*load)
	lo, _ := atRank(&counts, n, 1-gapShare*load)
	// A gap: gapBuckets buckets in a row that hold almost nothing, right
	// above a bucket from lo's to a little above aim's. Hedging from the
	// gap's lower edge costs at most gapShare × MaxExtraLoad of the calls
	// (by lo's rank) and takes every call beyond the gap early. While the
	// bucket is empty and calls want far more hedges than the cap pays
	// for (the latency has just shifted, say), the search starts at aim,
	// so the delay does not go below it. An empty bucket alone (a burst
	// of slow calls spent it) does not move the search: the delay stays
	// where the tail starts and the calls after the burst are hedged
	// early again as soon as credit returns.
	limit := uint64(gapMass * load * float64(n))
	if h.surging.Load() && math.Float64frombits(h.tokens.Load()) < 1 {
		lo = aim
	}
	for b := lo; b <= aim+gapAbove && b+gapBuckets < latBuckets; b++ {
		var in uint64
		for _, c := range counts[b+1 : b+1+gapBuckets] {
			in += c
		}
		if in <= limit {
			return time.Duration(latUpper(b)), true
		}
	}
	return at, true
}

// recent sums into counts the newest quarters of the window ending at now,
// newest first, until they hold at least enough results (or the window
// ends), and returns how many they hold: under steady traffic the estimate
// follows the last quarter or two, and a quiet key still sees the whole
// window.
func (h *hedgeKey) recent(now time.Time, counts *[latBuckets]uint64, enough uint64) uint64 {
	e := now.UnixNano()/latSlotSpan + 1
	var n uint64
	for age := range int64(latSlots) {
		s := &h.slots[(e-age)%latSlots]
		if s.epoch.Load() != e-age {
			continue // unused, or stale: not in the window
		}
		for b := range s.counts {
			c := uint64(s.counts[b].Load())
			counts[b] += c
			n += c
		}
		if n >= enough {
			break
		}
	}
	return n
}

// atRank returns the bucket holding the q-th percentile of counts, which
// hold n > 0 results, and the percentile's estimate: interpolated linearly
// between the bucket's bounds by the rank's place among its results.
func atRank(counts *[latBuckets]uint64, n uint64, q float64) (int, time.Duration) {
	rank := max(uint64(math.Ceil(q*float64(n))), 1)
	var seen uint64
	for b, c := range counts {
		if seen+c >= rank {
			lower := int64(1) << latMinExp // the first bucket's results count from 16µs
			if b > 0 {
				lower = latUpper(b - 1)
			}
			f := float64(rank-seen) / float64(c)
			return b, time.Duration(lower + int64(f*float64(latUpper(b)-lower)))
		}
		seen += c
	}
	return latBuckets - 1, time.Duration(latUpper(latBuckets - 1))
}

// current returns the key's hedge delay at now, recomputing it when the
// cached one is older than refreshNs or the key is cold.
func (h *hedgeKey) current(now time.Time) time.Duration {
	ns := now.UnixNano()
	if c := h.computed.Load(); c != 0 && ns-c < refreshNs && ns >= c && h.warm.Load() {
		return time.Duration(h.delay.Load())
	}
	if !h.refresh.TryLock() {
		// Someone else is on it; the old value will do, unless there is
		// none yet (computed is stored after delay): a cold key's delay.
		if h.computed.Load() == 0 {
			return h.cfg.clamp(h.cfg.coldDelay())
		}
		return time.Duration(h.delay.Load())
	}
	defer h.refresh.Unlock()
	cfg := h.cfg
	if h.computed.Load() == 0 {
		h.born.Store(ns) // the first computation: the rate counts from here
	}
	h.setCapacity(max(cfg.credit(), cfg.MaxExtraLoad*min(h.callsPer(now, creditSpan), ceilCalls)))
	if c := h.calls.Load(); c >= surgeCalls {
		w := h.wants.Swap(0)
		h.calls.Add(^(c - 1)) // subtracts c: calls made meanwhile stay counted
		h.surging.Store(float64(w) > surgeShare*cfg.MaxExtraLoad*float64(c))
	}
	d, warm := h.estimate(now)
	if d == 0 {
		d = cfg.coldDelay()
	}
	d = cfg.clamp(d)
	h.delay.Store(int64(d))
	h.warm.Store(warm)
	h.computed.Store(ns)
	return d
}

// coldDelay is the delay of a key with too few results: MaxDelay, or
// AdaptiveColdDelay without one.
func (c *AdaptiveHedging) coldDelay() time.Duration {
	if c.MaxDelay > 0 {
		return c.MaxDelay
	}
	return AdaptiveColdDelay
}

// credit is C, a new key's starting credit: StartingCredit, or by default
// the tokens of creditCalls calls (at least 2).
func (c *AdaptiveHedging) credit() float64 {
	if c.StartingCredit > 0 {
		return float64(c.StartingCredit)
	}
	return max(2, math.Ceil(c.MaxExtraLoad*creditCalls-1e-9))
}

// clamp bounds d to [MinDelay, MaxDelay].
func (c *AdaptiveHedging) clamp(d time.Duration) time.Duration {
	if c.MaxDelay > 0 {
		d = min(d, c.MaxDelay)
	}
	return max(d, c.MinDelay)
}

// callsPer returns how many results the key records per span at now's
// rate: the window's results over the time it covers (from the key's
// first computation at the earliest).
func (h *hedgeKey) callsPer(now time.Time, span int64) float64 {
	ns := now.UnixNano()
	e := ns/latSlotSpan + 1
	var n uint64
	oldest := e
	for i := range h.slots {
		s := &h.slots[i]
		se := s.epoch.Load()
		if se <= e-latSlots || se > e {
			continue // outside the window
		}
		oldest = min(oldest, se)
		for b := range s.counts {
			n += uint64(s.counts[b].Load())
		}
	}
	from := max((oldest-1)*latSlotSpan, h.born.Load())
	covered := max(ns-from, refreshNs) // a young key's rate from at least 100ms
	return float64(n) * float64(span) / float64(covered)
}

// setCapacity sets the bucket's capacity, cutting the tokens to it: the
// tokens never exceed the capacity the bucket has.
func (h *hedgeKey) setCapacity(capacity float64) {
	h.capacity.Store(math.Float64bits(capacity))
	for {
		old := h.tokens.Load()
		if math.Float64frombits(old) <= capacity || h.tokens.CompareAndSwap(old, math.Float64bits(capacity)) {
			return
		}
	}
}

// deposit pays one call's MaxExtraLoad tokens into the bucket.
func (h *hedgeKey) deposit() {
	h.calls.Add(1)
	capacity := math.Float64frombits(h.capacity.Load())
	for {
		old := h.tokens.Load()
		t := math.Float64frombits(old)
		if t >= capacity {
			return
		}
		n := min(t+h.cfg.MaxExtraLoad, capacity)
		if h.tokens.CompareAndSwap(old, math.Float64bits(n)) {
			return
		}
	}
}

// take takes one hedge's token, reporting whether there was one.
func (h *hedgeKey) take() bool {
	h.wants.Add(1)
	for {
		old := h.tokens.Load()
		t := math.Float64frombits(old)
		if t < 1 {
			return false
		}
		if h.tokens.CompareAndSwap(old, math.Float64bits(t-1)) {
			return true
		}
	}
}

// untake gives back a token taken for a hedge that did not launch (the
// budget or the breaker refused it), never filling the bucket past its
// capacity: calls that paid in meanwhile may have filled it already.
func (h *hedgeKey) untake() {
	capacity := math.Float64frombits(h.capacity.Load())
	for {
		old := h.tokens.Load()
		n := min(math.Float64frombits(old)+1, capacity)
		if h.tokens.CompareAndSwap(old, math.Float64bits(n)) {
			return
		}
	}
}

// newHedgeKey returns a cold key's state for cfg: its bucket holds its
// starting credit.
func newHedgeKey(cfg *AdaptiveHedging) *hedgeKey {
	k := &hedgeKey{cfg: cfg}
	c := cfg.credit()
	k.capacity.Store(math.Float64bits(c))
	k.tokens.Store(math.Float64bits(c))
	return k
}

// hedgeState returns h's adaptive hedging state, making it on first use.
func (h *host) hedgeState(cfg *AdaptiveHedging) *hedgeKey {
	if k := h.hedge.Load(); k != nil {
		return k
	}
	k := newHedgeKey(cfg)
	if !h.hedge.CompareAndSwap(nil, k) {
		return h.hedge.Load()
	}
	return k
}
