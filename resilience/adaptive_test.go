package resilience

import (
	"math"
	"slices"
	"testing"
	"time"

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

// TestPercentileEstimateError: on random latency sets, the estimate of any
// percentile is never below the exact one and at most 12.5% above it.
func TestPercentileEstimateError(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
		k := &hedgeKey{cfg: &cfg}
		vals := rapid.SliceOfN(rapid.Int64Range(1<<latMinExp, 1<<latMaxExp), 1, 2000).Draw(t, "latencies")
		for _, v := range vals {
			k.record(adaptiveStart, time.Duration(v))
		}
		q := rapid.Float64Range(0.01, 0.999).Draw(t, "q")
		got, n := k.percentile(adaptiveStart, q)
		slices.Sort(vals)
		rank := max(int(math.Ceil(q*float64(len(vals)))), 1)
		exact := vals[rank-1]
		if n != uint64(len(vals)) || int64(got) < exact || float64(got) > float64(exact)*1.125 {
			t.Fatalf("p%.3f of %d values: estimate %v (n %d), exact %v", q*100, len(vals), got, n, time.Duration(exact))
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
	if p, n := k.percentile(adaptiveStart.Add(AdaptiveWindow/2), 0.5); n != 100 || p < 50*time.Millisecond {
		t.Fatalf("half a window later: p50 %v of %d, want the 100 results of 50ms", p, n)
	}
	later := adaptiveStart.Add(AdaptiveWindow + AdaptiveWindow/latSlots)
	for range 10 {
		k.record(later, time.Millisecond)
	}
	if p, n := k.percentile(later, 0.99); n != 10 || p > 2*time.Millisecond {
		t.Fatalf("a window later: p99 %v of %d, want only the 10 new 1ms results", p, n)
	}
}

// TestAdaptiveDelay: cold keys use MaxDelay (or AdaptiveColdDelay), warm
// ones the percentile, clamped, and the value is cached for 100ms.
func TestAdaptiveDelay(t *testing.T) {
	tests := []struct {
		name     string
		cfg      AdaptiveHedging
		samples  int
		wantCold bool
		want     time.Duration // lower bound of the expected delay
		wantMax  time.Duration // upper bound
	}{
		{"cold without MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05}, AdaptiveMinSamples - 1, true, AdaptiveColdDelay, AdaptiveColdDelay},
		{"cold with MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 300 * time.Millisecond}, 10, true, 300 * time.Millisecond, 300 * time.Millisecond},
		{"warm: the p95", AdaptiveHedging{MaxExtraLoad: 0.05}, 1000, false, 20 * time.Millisecond, 23 * time.Millisecond},
		{"warm, raised to MinDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MinDelay: 50 * time.Millisecond}, 1000, false, 50 * time.Millisecond, 50 * time.Millisecond},
		{"warm, cut to MaxDelay", AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 5 * time.Millisecond}, 1000, false, 5 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &hedgeKey{cfg: &tc.cfg}
			for i := range tc.samples {
				d := time.Millisecond
				if i%20 == 0 { // 5% at 20ms: the p95 sits at the top of the fast ones or at 20ms
					d = 20 * time.Millisecond
				}
				if i%100 == 1 { // and 1% more
					d = 20 * time.Millisecond
				}
				k.record(adaptiveStart, d)
			}
			got := k.current(adaptiveStart)
			if got < tc.want || got > tc.wantMax || k.warm.Load() == tc.wantCold {
				t.Errorf("delay %v (warm %v), want in [%v, %v] (cold %v)", got, k.warm.Load(), tc.want, tc.wantMax, tc.wantCold)
			}
			for range 5000 {
				k.record(adaptiveStart, time.Second)
			}
			if again := k.current(adaptiveStart.Add(50 * time.Millisecond)); again != got {
				t.Errorf("recomputed within 100ms: %v then %v", got, again)
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
		{MaxExtraLoad: 0}, {MaxExtraLoad: 1}, {MaxExtraLoad: math.NaN()},
		{MaxExtraLoad: 0.1, MinDelay: -1}, {MaxExtraLoad: 0.1, MaxDelay: -1},
		{MaxExtraLoad: 0.1, MinDelay: 2, MaxDelay: 1},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (AdaptiveHedging{MaxExtraLoad: 0.05, MinDelay: time.Millisecond, MaxDelay: time.Second}).Validate(); err != nil {
		t.Error(err)
	}
}

// BenchmarkAdaptiveRecord: the hot path of one attempt (record its latency,
// read the cached delay, pay the call's tokens) allocates nothing.
func BenchmarkAdaptiveRecord(b *testing.B) {
	cfg := AdaptiveHedging{MaxExtraLoad: 0.05}
	hosts := newHostTable(0, nil)
	now := adaptiveStart
	b.ReportAllocs()
	for b.Loop() {
		k := hosts.get("payments.internal", now).hedgeState(&cfg)
		k.deposit()
		_ = k.current(now)
		k.record(now, 3*time.Millisecond)
	}
}
