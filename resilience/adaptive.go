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
// extra load it accepts, and a hedge is sent after the latency percentile
// that keeps the load there.
//
// The model, per key:
//
//   - Every call's first attempt's time to its result (for HTTP, to the
//     response headers; for a first attempt that lost to a hedge, to its
//     cancellation, a lower bound) goes into a sliding-window latency histogram
//     (AdaptiveWindow long, in four rotating quarters; log-linear buckets,
//     eight per power of two, from 16µs to 34s). Recording is one atomic add:
//     no lock, no allocation.
//   - The hedge delay is the (1 − MaxExtraLoad) percentile of that window,
//     clamped to [MinDelay, MaxDelay], recomputed at most every 100ms. The
//     estimate is the upper bound of the bucket holding the exact
//     percentile, so it is never below it and at most 12.5% above it: an
//     error that errs toward fewer hedges.
//   - Until the window holds AdaptiveMinSamples results (a cold key), the
//     delay is MaxDelay when set, otherwise AdaptiveColdDelay.
//   - A hard cap holds whatever the percentile says: a token bucket per key
//     into which every call pays MaxExtraLoad tokens and every hedge takes
//     one. Its capacity is the tokens of 100 calls (MaxExtraLoad × 100, and
//     at least 2), so over any interval the hedges launched for a key never
//     exceed MaxExtraLoad × the calls in that interval + that capacity. A sudden shift in latency
//     therefore cannot turn every call into two while the percentile
//     catches up. Hedges also still count against MaxAttempts and spend the
//     retry budget.
//
// The per-key state is about 3 KiB, made on a key's first adaptive call;
// the keys are the engine's (EngineConfig.MaxKeys bounds them).
type AdaptiveHedging struct {
	// MaxExtraLoad is the fraction of calls that may get a hedge, in
	// (0, 1): 0.05 sends at most one hedge per 20 calls.
	MaxExtraLoad float64
	// MinDelay and MaxDelay clamp the learned delay; 0 means no bound
	// (MinDelay) or AdaptiveColdDelay for a cold key (MaxDelay).
	MinDelay, MaxDelay time.Duration
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
	burstCalls  = 100                           // the token bucket holds the tokens of this many calls
)

// Validate checks the configuration, naming the field it rejects.
func (c AdaptiveHedging) Validate() error {
	switch {
	case !(c.MaxExtraLoad > 0 && c.MaxExtraLoad < 1):
		return fmt.Errorf("resilience: AdaptiveHedging.MaxExtraLoad must be in (0, 1), got %v", c.MaxExtraLoad)
	case c.MinDelay < 0:
		return fmt.Errorf("resilience: AdaptiveHedging.MinDelay must not be negative, got %v", c.MinDelay)
	case c.MaxDelay < 0:
		return fmt.Errorf("resilience: AdaptiveHedging.MaxDelay must not be negative, got %v", c.MaxDelay)
	case c.MaxDelay > 0 && c.MinDelay > c.MaxDelay:
		return fmt.Errorf("resilience: AdaptiveHedging.MinDelay %v is above MaxDelay %v", c.MinDelay, c.MaxDelay)
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
	// refreshNs. Written under refresh (TryLock: a reader never waits).
	refresh  sync.Mutex
	computed atomic.Int64 // when, in ns (0: never)
	delay    atomic.Int64 // ns
	warm     atomic.Bool
	capacity atomic.Uint64 // float64 bits

	tokens atomic.Uint64 // float64 bits: the hedges the key may still launch
	capped atomic.Uint64 // hedges the cap held back
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

// percentile returns the upper bound of the bucket holding the q-th
// percentile of the window ending at now, and how many results the window
// holds.
func (h *hedgeKey) percentile(now time.Time, q float64) (time.Duration, uint64) {
	e := now.UnixNano()/latSlotSpan + 1
	var counts [latBuckets]uint64
	var n uint64
	for i := range h.slots {
		s := &h.slots[i]
		if se := s.epoch.Load(); se <= e-latSlots || se > e {
			continue // outside the window
		}
		for b := range s.counts {
			c := uint64(s.counts[b].Load())
			counts[b] += c
			n += c
		}
	}
	if n == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range &counts {
		seen += c
		if seen >= rank {
			return time.Duration(latUpper(b)), n
		}
	}
	return time.Duration(latUpper(latBuckets - 1)), n
}

// current returns the key's hedge delay at now, recomputing it when the
// cached one is older than refreshNs, and whether the key is warm.
func (h *hedgeKey) current(now time.Time) time.Duration {
	ns := now.UnixNano()
	if c := h.computed.Load(); c != 0 && ns-c < refreshNs && ns >= c {
		return time.Duration(h.delay.Load())
	}
	if !h.refresh.TryLock() {
		return time.Duration(h.delay.Load()) // someone else is on it; the old value will do
	}
	defer h.refresh.Unlock()
	cfg := h.cfg
	p, n := h.percentile(now, 1-cfg.MaxExtraLoad)
	d := p
	warm := n >= AdaptiveMinSamples
	if !warm {
		d = cfg.MaxDelay
		if d == 0 {
			d = AdaptiveColdDelay
		}
	}
	if cfg.MaxDelay > 0 {
		d = min(d, cfg.MaxDelay)
	}
	d = max(d, cfg.MinDelay)
	// Capacity: the tokens of burstCalls calls, and at least two hedges.
	capacity := max(2, cfg.MaxExtraLoad*burstCalls)
	h.capacity.Store(math.Float64bits(capacity))
	h.delay.Store(int64(d))
	h.warm.Store(warm)
	h.computed.Store(ns)
	return d
}

// deposit pays one call's MaxExtraLoad tokens into the bucket.
func (h *hedgeKey) deposit() {
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
// budget or the breaker refused it).
func (h *hedgeKey) untake() {
	for {
		old := h.tokens.Load()
		n := math.Float64frombits(old) + 1
		if h.tokens.CompareAndSwap(old, math.Float64bits(n)) {
			return
		}
	}
}

// newHedgeKey returns a cold key's state for cfg.
func newHedgeKey(cfg *AdaptiveHedging) *hedgeKey {
	k := &hedgeKey{cfg: cfg}
	k.capacity.Store(math.Float64bits(1))
	k.tokens.Store(math.Float64bits(1))
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
