package resilience

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"pgregory.net/rapid"
)

var adaptiveStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// TestLatencyBucketsBoundTheirValues: every latency in range lands in a
// bucket whose upper bound is above it by at most 12.5%.
func TestLatencyBucketsBoundTheirValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ns := rapid.Int64Range(1<<latMinExp, 1<<(latMaxExp+1)-1).Draw(t, "ns")
		b := latBucket(ns)
		up := latUpper(b)
		if up <= ns || float64(up) > float64(ns)*1.125 {
			t.Fatalf("%dns in bucket %d with upper bound %d", ns, b, up)
		}
		if b > 0 && latUpper(b-1) > ns {
			t.Fatalf("%dns in bucket %d, but bucket %d ends at %d", ns, b, b-1, latUpper(b-1))
		}
	})
}

// windowPercentile reads the q-th percentile of k's whole window at now
// the way the delay's estimate does (recent's counts, atRank's
// interpolation), with its bucket and the number of results read.
func windowPercentile(k *hedgeKey, now time.Time, q float64) (time.Duration, int, uint64) {
	var counts [latBuckets]uint64
	n := k.recent(now, &counts, math.MaxUint64)
	if n == 0 {
		return 0, 0, 0
	}
	b, d := atRank(&counts, n, q)
	return d, b, n
}

// TestPercentileEstimateError: on random latency sets, the estimate of any
// percentile that the delay reads (atRank over recent's counts, as
// estimate calls them) lies in the bucket of the exact percentile: within
// 12.5% of it either way.
func TestPercentileEstimateError(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
		k := &hedgeKey{cfg: &cfg}
		vals := rapid.SliceOfN(rapid.Int64Range(1<<latMinExp, 1<<latMaxExp), 1, 2000).Draw(t, "latencies")
		for _, v := range vals {
			k.record(adaptiveStart, time.Duration(v))
		}
		q := rapid.Float64Range(0.01, 0.999).Draw(t, "q")
		got, b, n := windowPercentile(k, adaptiveStart, q)
		slices.Sort(vals)
		rank := max(int(math.Ceil(q*float64(len(vals)))), 1)
		exact := vals[rank-1]
		if n != uint64(len(vals)) || b != latBucket(exact) || float64(got) > float64(exact)*1.125 || float64(got)*1.125 < float64(exact) {
			t.Fatalf("p%.3f of %d values: estimate %v in bucket %d (n %d), exact %v in bucket %d",
				q*100, len(vals), got, b, n, time.Duration(exact), latBucket(exact))
		}
	})
}

// TestLatencyWindowSlides: results leave the window once it has moved
// past their quarter.
func TestLatencyWindowSlides(t *testing.T) {
	cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
	k := &hedgeKey{cfg: &cfg}
	for range 100 {
		k.record(adaptiveStart, 50*time.Millisecond)
	}
	if p, _, n := windowPercentile(k, adaptiveStart.Add(AdaptiveWindow/2), 0.5); n != 100 || p < 45*time.Millisecond {
		t.Fatalf("half a window later: p50 %v of %d, want the 100 results of 50ms", p, n)
	}
	later := adaptiveStart.Add(AdaptiveWindow + AdaptiveWindow/latSlots)
	for range 10 {
		k.record(later, time.Millisecond)
	}
	if p, _, n := windowPercentile(k, later, 0.99); n != 10 || p > 2*time.Millisecond {
		t.Fatalf("a window later: p99 %v of %d, want only the 10 new 1ms results", p, n)
	}
}

// TestAdaptiveDelay: cold keys use MaxDelay (or AdaptiveColdDelay), then,
// from 4 results on, 1.5 × the bucket of their p90 (of the slowest below
// 10; recomputed at every call until warm); warm ones the (1 − 0.95 × MaxExtraLoad) percentile, or the lower
// edge of a gap near it, clamped, and cached for 100ms.
func TestAdaptiveDelay(t *testing.T) {
	// bimodal: 94% at 1ms, 6% at 20ms, nothing between: a gap.
	bimodal := func(i int) time.Duration {
		if i%20 == 0 || i%100 == 1 {
			return 20 * time.Millisecond
		}
		return time.Millisecond
	}
	// spread: evenly from 0.1ms to 10ms, no gap anywhere.
	spread := func(i int) time.Duration { return time.Duration(1+i%100) * 100 * time.Microsecond }
	tests := []struct {
		name     string
		cfg      AdaptiveHedging
		samples  int
		latency  func(i int) time.Duration
		wantCold bool
		want     time.Duration // lower bound of the expected delay
		wantMax  time.Duration // upper bound
	}{
		{"cold without MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05}, warmupSamples - 1, spread, true, AdaptiveColdDelay, AdaptiveColdDelay},
		{"cold with MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 300 * time.Millisecond}, warmupSamples - 1, spread, true, 300 * time.Millisecond, 300 * time.Millisecond},
		{"warming: 1.5 × the p90's bucket (4.5ms: up to 4.72ms)", AdaptiveHedging{MaxExtraLoad: 0.05}, AdaptiveMinSamples - 1, spread, true, 7070 * time.Microsecond, 7080 * time.Microsecond},
		{"warming, under 10 results: 1.5 × the slowest's bucket (0.9ms: up to 0.918ms)", AdaptiveHedging{MaxExtraLoad: 0.05}, 9, spread, true, 1370 * time.Microsecond, 1380 * time.Microsecond},
		{"warming, cut to MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 2 * time.Millisecond}, AdaptiveMinSamples - 1, spread, true, 2 * time.Millisecond, 2 * time.Millisecond},
		{"warm, no gap: the aim (the p95.25, within its bucket)", AdaptiveHedging{MaxExtraLoad: 0.05}, 1000, spread, false, 9600 * time.Microsecond, 10800 * time.Microsecond},
		{"warm, a gap below the aim: its lower edge", AdaptiveHedging{MaxExtraLoad: 0.05}, 1000, bimodal, false, time.Millisecond, 1125 * time.Microsecond},
		{"warm, a gap too costly (the slow share above 1.2 × the cap): the aim", AdaptiveHedging{MaxExtraLoad: 0.03}, 1000, bimodal, false, 20 * time.Millisecond, 22500 * time.Microsecond},
		{"warm, raised to MinDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MinDelay: 50 * time.Millisecond}, 1000, spread, false, 50 * time.Millisecond, 50 * time.Millisecond},
		{"warm, cut to MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 5 * time.Millisecond}, 1000, spread, false, 5 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &hedgeKey{cfg: &tc.cfg}
			for i := range tc.samples {
				k.record(adaptiveStart, tc.latency(i))
			}
			got := k.current(adaptiveStart)
			if got < tc.want || got > tc.wantMax || k.warm.Load() == tc.wantCold {
				t.Errorf("delay %v (warm %v), want in [%v, %v] (cold %v)", got, k.warm.Load(), tc.want, tc.wantMax, tc.wantCold)
			}
			for range 5000 {
				k.record(adaptiveStart, time.Second)
			}
			again := k.current(adaptiveStart.Add(50 * time.Millisecond))
			if !tc.wantCold && again != got {
				t.Errorf("recomputed within 100ms: %v then %v", got, again)
			}
			if tc.wantCold && !k.warm.Load() {
				t.Errorf("a cold key was not recomputed within 100ms: still cold after 5000 more results")
			}
		})
	}
}

// TestHedgeCapOverAnyInterval: whatever the order of calls and hedges, over
// any stretch of them the hedges taken never exceed MaxExtraLoad × the
// calls in it plus the bucket's capacity.
func TestHedgeCapOverAnyInterval(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		load := rapid.Float64Range(0.001, 0.5).Draw(t, "load")
		capacity := rapid.Float64Range(1, 50).Draw(t, "capacity")
		cfg := AdaptiveHedging{MaxExtraLoad: load}
		k := &hedgeKey{cfg: &cfg}
		k.capacity.Store(math.Float64bits(capacity))
		k.tokens.Store(math.Float64bits(rapid.Float64Range(0, capacity).Draw(t, "initial tokens")))
		events := rapid.SliceOfN(rapid.Bool(), 1, 400).Draw(t, "events (true: a call, false: a hedge wanted)")
		calls := make([]int, len(events)+1) // prefix sums
		hedges := make([]int, len(events)+1)
		for i, call := range events {
			calls[i+1], hedges[i+1] = calls[i], hedges[i]
			if call {
				k.deposit()
				calls[i+1]++
			} else if k.take() {
				hedges[i+1]++
			}
		}
		for i := range events {
			for j := i + 1; j <= len(events); j++ {
				h, c := hedges[j]-hedges[i], calls[j]-calls[i]
				if float64(h) > load*float64(c)+capacity+1e-9 {
					t.Fatalf("events %d..%d: %d hedges for %d calls at load %v, capacity %v", i, j, h, c, load, capacity)
				}
			}
		}
	})
}

func TestAdaptiveHedgingValidate(t *testing.T) {
	bad := []AdaptiveHedging{
		{MaxExtraLoad: -0.1}, {MaxExtraLoad: 1}, {MaxExtraLoad: math.NaN()},
		{MaxExtraLoad: 0.1, MinDelay: -1}, {MaxExtraLoad: 0.1, MaxDelay: -1},
		{MaxExtraLoad: 0.1, MinDelay: 2, MaxDelay: 1},
		{MaxExtraLoad: 0.1, StartingCredit: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	for _, c := range []AdaptiveHedging{{MaxExtraLoad: 0.05, MinDelay: time.Millisecond, MaxDelay: time.Second}, {}} {
		if err := c.Validate(); err != nil { // the zero value is the defaults
			t.Error(err)
		}
	}
	if err := (AdaptiveHedging{MaxExtraLoad: 0.05, StartingCredit: -3}).Validate(); err == nil || !strings.Contains(err.Error(), "StartingCredit") {
		t.Errorf("a negative StartingCredit: %v, want an error naming the field", err)
	}
	for _, tc := range []struct {
		cfg  AdaptiveHedging
		want float64
	}{
		{AdaptiveHedging{MaxExtraLoad: 0.05}, 20}, // the zero value is the default, the tokens of 400 calls
		{AdaptiveHedging{MaxExtraLoad: 0.10}, 40},
		{AdaptiveHedging{MaxExtraLoad: 0.001}, 2},
		{AdaptiveHedging{MaxExtraLoad: 0.05, StartingCredit: 7}, 7},
	} {
		if got := tc.cfg.credit(); got != tc.want {
			t.Errorf("%+v: starting credit %v, want %v", tc.cfg, got, tc.want)
		}
	}
}

// BenchmarkAdaptiveRecord: the hot path of one attempt (record its latency,
// read the cached delay, pay the call's tokens) allocates nothing.
func BenchmarkAdaptiveRecord(b *testing.B) {
	cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
	hosts := newHostTable(0)
	now := adaptiveStart
	b.ReportAllocs()
	for b.Loop() {
		k := hosts.get("payments.internal", when(now)).hedgeState(&cfg)
		k.deposit()
		_ = k.current(now)
		k.record(now, 3*time.Millisecond)
	}
}

// TestColdKeyNeverHedgesAtZero: a key whose delay is being computed by
// another call (its refresh lock held) still answers the cold delay, never
// the zero it starts with, and every delay is within [MinDelay, MaxDelay].
func TestColdKeyNeverHedgesAtZero(t *testing.T) {
	for _, cfg := range []AdaptiveHedging{
		{MaxExtraLoad: 0.05},
		{MaxExtraLoad: 0.05, MaxDelay: 300 * time.Millisecond},
		{MaxExtraLoad: 0.05, MinDelay: 2 * time.Millisecond, MaxDelay: 300 * time.Millisecond},
	} {
		want := cfg.MaxDelay
		if want == 0 {
			want = AdaptiveColdDelay
		}
		k := newHedgeKey(&cfg)
		k.refresh.Lock() // another call is computing the delay right now
		got := k.current(adaptiveStart)
		k.refresh.Unlock()
		if got != want {
			t.Errorf("%+v: cold delay while another call computes it: %v, want %v", cfg, got, want)
		}
	}
}

// TestRefusedHedgesDoNotOvershootTheCap: tokens given back for hedges the
// budget refused never lift the bucket above its capacity, so over any
// stretch the hedges that launched stay within MaxExtraLoad × the calls in
// it plus the capacity, whatever calls paid in while a refused hedge held
// its token.
func TestRefusedHedgesDoNotOvershootTheCap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		load := rapid.Float64Range(0.001, 0.5).Draw(t, "load")
		cfg := AdaptiveHedging{MaxExtraLoad: load}
		k := newHedgeKey(&cfg)
		k.current(adaptiveStart) // sets the capacity
		capacity := math.Float64frombits(k.capacity.Load())
		// Events: 0 a call, 1 a hedge the budget lets launch, 2 a hedge the
		// budget refuses, with calls paying in between take and untake.
		events := rapid.SliceOfN(rapid.IntRange(0, 2), 1, 300).Draw(t, "events")
		between := rapid.SliceOfN(rapid.IntRange(0, 20), len(events), len(events)).Draw(t, "calls while a refused hedge holds its token")
		calls := make([]int, len(events)+1)
		hedges := make([]int, len(events)+1)
		for i, ev := range events {
			calls[i+1], hedges[i+1] = calls[i], hedges[i]
			switch ev {
			case 0:
				k.deposit()
				calls[i+1]++
			case 1:
				if k.take() {
					hedges[i+1]++
				}
			case 2:
				took := k.take()
				for range between[i] {
					k.deposit()
					calls[i+1]++
				}
				if took {
					k.untake()
				}
			}
			if tok := math.Float64frombits(k.tokens.Load()); tok > capacity+1e-9 {
				t.Fatalf("after event %d: %v tokens, above the capacity %v", i, tok, capacity)
			}
		}
		for i := range events {
			for j := i + 1; j <= len(events); j++ {
				h, c := hedges[j]-hedges[i], calls[j]-calls[i]
				if float64(h) > load*float64(c)+capacity+1e-9 {
					t.Fatalf("events %d..%d: %d hedges for %d calls at load %v, capacity %v", i, j, h, c, load, capacity)
				}
			}
		}
	})
}

// TestLostFirstAttemptRecordedAboveItsTime: a first attempt that lost to a
// hedge goes into the key's histogram at 1.5× the time it ran (its latency
// is only known to exceed that), not at the time itself.
func TestLostFirstAttemptRecordedAboveItsTime(t *testing.T) {
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{Adaptive: &AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 40 * time.Millisecond}})
	op := &scripted{steps: []step{{block: true}, {v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Key: "h", Op: promptOp[int]{op}, Policy: Policy{MaxAttempts: 3, MaxHedges: 1}})
	if !fc.WaitForArmed(1, 5*time.Second) {
		t.Fatal("hedge timer never armed")
	}
	fc.Advance(40 * time.Millisecond) // the cold delay: the hedge launches and wins
	res := <-done
	if res.Err != nil || res.Value != 200 || res.Attempt != 2 {
		t.Fatalf("res %+v", res)
	}
	res.Finish(nil)
	k := e.hosts.lookup("h").hedge.Load()
	deadline := time.Now().Add(5 * time.Second)
	for { // the loser records itself once its Do returns, possibly after Execute did
		if _, _, n := windowPercentile(k, fc.Now(), 1); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lost first attempt was never recorded")
		}
		time.Sleep(time.Millisecond)
	}
	if p, _, _ := windowPercentile(k, fc.Now(), 1); p < 60*time.Millisecond || p > 68*time.Millisecond {
		t.Errorf("lost after 40ms, recorded in the bucket ending at %v, want the one holding 60ms", p)
	}
}

// fastLatency is a healthy answer: 1ms plus a little jitter, as a loaded
// loopback has.
func fastLatency(r *rand.Rand) time.Duration {
	return time.Millisecond + time.Duration(r.ExpFloat64()*float64(200*time.Microsecond))
}

// TestAdaptiveDelayAim: on each shape of latency, the warm delay sits where
// the tail starts: just above the fast band when a slow band (stalls, a
// second service) holds no more than the cap, near the (1 − 0.95 ×
// MaxExtraLoad) percentile on a heavy tail without a band.
func TestAdaptiveDelayAim(t *testing.T) {
	tests := []struct {
		name     string
		draw     func(r *rand.Rand) time.Duration
		min, max time.Duration
	}{
		{"random stalls (5% take 20–200ms more): above the fast band", func(r *rand.Rand) time.Duration {
			d := fastLatency(r)
			if r.Float64() < 0.05 {
				d += 20*time.Millisecond + time.Duration(r.Float64()*float64(180*time.Millisecond))
			}
			return d
		}, 1500 * time.Microsecond, 5 * time.Millisecond},
		{"bimodal (3% from a 6–12ms service): above the fast band", func(r *rand.Rand) time.Duration {
			if r.Float64() < 0.03 {
				return 6*time.Millisecond + time.Duration(r.Float64()*float64(6*time.Millisecond))
			}
			return fastLatency(r)
		}, 1500 * time.Microsecond, 6 * time.Millisecond},
		{"lognormal (median 1ms, σ 1.25): near its p95.25, 8.06ms", func(r *rand.Rand) time.Duration {
			return time.Duration(float64(time.Millisecond) * math.Exp(1.25*r.NormFloat64()))
		}, 7 * time.Millisecond, 9500 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(t0)
			cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
			k := newHedgeKey(&cfg)
			r := rand.New(rand.NewPCG(31, 31))
			for range 4000 {
				k.record(fc.Now(), tc.draw(r))
				fc.Advance(250 * time.Microsecond)
			}
			if d := k.current(fc.Now()); d < tc.min || d > tc.max || !k.warm.Load() {
				t.Errorf("delay %v (warm %v), want in [%v, %v]", d, k.warm.Load(), tc.min, tc.max)
			}
		})
	}
}

// TestBucketHedgesABurstFromQuietCredit: the credit a key builds up while
// few calls want a hedge pays for a burst of slow calls, and a burst that
// drains the bucket does not leave the key blind. After 2s of 1,000 calls
// a second, 3% of them slow, the bucket holds a second of the calls'
// tokens, and 30 slow calls within 3ms all get their hedge (a bucket of
// 200 calls' tokens, 10 at 5%, refuses 20 of them). A second burst then
// empties it; once calls are back to normal, the delay is back just above
// the fast band, not in the slow band, and every slow call is hedged
// again.
func TestBucketHedgesABurstFromQuietCredit(t *testing.T) {
	fc := fakeclock.New(t0)
	cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
	k := newHedgeKey(&cfg)
	r := rand.New(rand.NewPCG(5, 5))
	// Healthy calls take 1–1.3ms here (no tail), so only slow ones want
	// a hedge and the credit they leave is known.
	fast := func() time.Duration {
		return time.Millisecond + time.Duration(r.Float64()*float64(300*time.Microsecond))
	}
	slow := func() time.Duration {
		return fast() + 20*time.Millisecond + time.Duration(r.Float64()*float64(180*time.Millisecond))
	}
	// call runs one call that takes lat unhedged: it pays its tokens,
	// hedges past the delay if the bucket lets it, and records its first
	// attempt as the engine does. It reports whether it wanted a hedge and
	// got one.
	call := func(lat time.Duration) (wanted, got bool) {
		k.deposit()
		d := k.current(fc.Now())
		if lat > d {
			wanted = true
			if got = k.take(); got {
				k.record(fc.Now(), lostLatency(d+fast()))
				return wanted, got
			}
		}
		k.record(fc.Now(), lat)
		return wanted, got
	}
	for i := range 2000 {
		lat := fast()
		if i%33 == 0 {
			lat = slow()
		}
		call(lat)
		fc.Advance(time.Millisecond)
	}
	capacity := math.Float64frombits(k.capacity.Load())
	if tok := math.Float64frombits(k.tokens.Load()); capacity < 40 || capacity > 60 || tok < 35 {
		t.Fatalf("after 2s at 1,000 calls/s: capacity %.1f tokens %.1f, want a second of the calls' tokens (about 50) and most of it saved", capacity, tok)
	}
	before := k.current(fc.Now())
	hedged := 0
	for range 30 {
		if wanted, got := call(slow()); wanted && got {
			hedged++
		}
		fc.Advance(100 * time.Microsecond)
	}
	if hedged != 30 {
		t.Errorf("a burst of 30 slow calls after quiet time: %d hedged, want all 30", hedged)
	}
	for range 30 { // a second burst: the bucket runs dry
		call(slow())
		fc.Advance(100 * time.Microsecond)
	}
	if tok := math.Float64frombits(k.tokens.Load()); tok >= 1 {
		t.Fatalf("after two bursts: %.1f tokens, want the bucket empty", tok)
	}
	var slowCalls, slowHedged int
	for i := range 600 { // back to normal: 3% slow
		lat := fast()
		if i%33 == 0 {
			lat = slow()
		}
		wanted, got := call(lat)
		if i >= 100 && lat > 20*time.Millisecond {
			slowCalls++
			if wanted && got {
				slowHedged++
			}
		}
		fc.Advance(time.Millisecond)
	}
	if after := k.current(fc.Now()); after > 5*time.Millisecond || slowHedged != slowCalls {
		t.Errorf("after a burst that drained the bucket: delay %v (before it %v), %d of %d slow calls hedged; want the delay just above the fast band again and every slow call hedged",
			after, before, slowHedged, slowCalls)
	}
}

// TestHedgeCapWithChangingCapacity: while the bucket's capacity follows
// the key's call rate (set between calls, cutting the tokens to it), over
// any stretch of calls and hedges the hedges taken never exceed
// MaxExtraLoad × the calls in it plus the capacity at its start.
func TestHedgeCapWithChangingCapacity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		load := rapid.Float64Range(0.001, 0.5).Draw(t, "load")
		cfg := AdaptiveHedging{MaxExtraLoad: load}
		k := &hedgeKey{cfg: &cfg}
		c0 := rapid.Float64Range(1, 50).Draw(t, "capacity")
		k.capacity.Store(math.Float64bits(c0))
		k.tokens.Store(math.Float64bits(c0))
		events := rapid.SliceOfN(rapid.IntRange(0, 2), 1, 300).Draw(t, "events (0 a call, 1 a hedge wanted, 2 a new capacity)")
		caps := rapid.SliceOfN(rapid.Float64Range(1, 200), len(events), len(events)).Draw(t, "capacities")
		calls := make([]int, len(events)+1) // prefix sums
		hedges := make([]int, len(events)+1)
		capAt := make([]float64, len(events)+1) // the capacity before event i
		capAt[0] = c0
		for i, ev := range events {
			calls[i+1], hedges[i+1] = calls[i], hedges[i]
			switch ev {
			case 0:
				k.deposit()
				calls[i+1]++
			case 1:
				if k.take() {
					hedges[i+1]++
				}
			case 2:
				k.setCapacity(caps[i])
			}
			capAt[i+1] = math.Float64frombits(k.capacity.Load())
			if tok := math.Float64frombits(k.tokens.Load()); tok > capAt[i+1]+1e-9 {
				t.Fatalf("after event %d: %v tokens above the capacity %v", i, tok, capAt[i+1])
			}
		}
		for i := range events {
			for j := i + 1; j <= len(events); j++ {
				h, c := hedges[j]-hedges[i], calls[j]-calls[i]
				if float64(h) > load*float64(c)+capAt[i]+1e-9 {
					t.Fatalf("events %d..%d: %d hedges for %d calls at load %v, capacity %v at the start", i, j, h, c, load, capAt[i])
				}
			}
		}
	})
}

// TestHedgeCapOverAKeysLife: a key's whole life through its real methods
// on a fake clock (calls at rates that change, so the bucket's capacity
// follows them; hedges wanted, some of them refused and given back): from
// its first call on, the hedges that launched never exceed MaxExtraLoad ×
// its calls + C, its starting credit; and over any stretch, MaxExtraLoad ×
// the calls in it + the larger of C and the tokens of 1,000 calls.
func TestHedgeCapOverAKeysLife(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		load := rapid.Float64Range(0.001, 0.5).Draw(t, "load")
		cfg := AdaptiveHedging{MaxExtraLoad: load, StartingCredit: rapid.IntRange(0, 100).Draw(t, "starting credit (0: the default)")}
		c := cfg.credit()
		ceiling := max(c, load*ceilCalls)
		k := newHedgeKey(&cfg)
		now := adaptiveStart
		// Events: 0 a call, 1 a hedge wanted, 2 a hedge wanted that the
		// budget refuses, 3 time passes (0–2s).
		events := rapid.SliceOfN(rapid.IntRange(0, 3), 1, 400).Draw(t, "events")
		calls := make([]int, len(events)+1) // prefix sums
		hedges := make([]int, len(events)+1)
		for i, ev := range events {
			calls[i+1], hedges[i+1] = calls[i], hedges[i]
			switch ev {
			case 0:
				k.deposit()
				k.current(now)
				k.record(now, time.Millisecond)
				calls[i+1]++
			case 1:
				if k.take() {
					hedges[i+1]++
				}
			case 2:
				if k.take() {
					k.untake()
				}
			case 3:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "advance")))
			}
			if cp := math.Float64frombits(k.capacity.Load()); cp > ceiling+1e-9 {
				t.Fatalf("after event %d: capacity %v above max(C, 1,000 calls' tokens) = %v", i, cp, ceiling)
			}
			if h, n := hedges[i+1], calls[i+1]; float64(h) > load*float64(n)+c+1e-9 {
				t.Fatalf("after event %d: %d hedges for the key's %d calls at load %v, above MaxExtraLoad × calls + C (%v)", i, h, n, load, c)
			}
		}
		for i := range events {
			for j := i + 1; j <= len(events); j++ {
				if h, n := hedges[j]-hedges[i], calls[j]-calls[i]; float64(h) > load*float64(n)+ceiling+1e-9 {
					t.Fatalf("events %d..%d: %d hedges for %d calls at load %v, above MaxExtraLoad × calls + %v", i, j, h, n, load, ceiling)
				}
			}
		}
	})
}
