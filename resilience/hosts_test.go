package resilience

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestHostTableBoundIsExact: MaxKeys means what it says, at any size: the
// table never holds more, evicts nothing below it, and fills it.
func TestHostTableBoundIsExact(t *testing.T) {
	for _, c := range []struct{ max, keys, want int }{
		{1, 10, 1},
		{8, 100, 8},  // below 16: was 16 with per-shard bounds
		{64, 60, 60}, // below the bound: nothing evicted
		{64, 1000, 64},
	} {
		tbl := newHostTable(c.max, nil)
		for i := range c.keys {
			if h := tbl.get(fmt.Sprintf("h%d", i), t0.Add(time.Duration(i)*time.Millisecond)); h == nil {
				t.Fatalf("max %d: key %d untracked with nothing pinned", c.max, i)
			}
			if n := tbl.Len(); n > c.max {
				t.Fatalf("max %d: %d keys tracked", c.max, n)
			}
		}
		if n := tbl.Len(); n != c.want {
			t.Errorf("max %d, %d keys: %d tracked, want %d", c.max, c.keys, n, c.want)
		}
	}
}

// TestHostTableEvictsIdleLeastRecentlyUsedFirst: room is made by evicting
// idle hosts before busy ones (attempts in flight under the limit, a
// breaker counting failures), least recently used first.
func TestHostTableEvictsIdleLeastRecentlyUsedFirst(t *testing.T) {
	cfg := ConcurrencyLimit{}.withDefaults()
	tbl := newHostTable(8, nil)
	tbl.newLimit = func() *limiter { return newLimiter(&cfg) }
	busy := tbl.get("busy", t0) // oldest, but with an attempt in flight
	busy.lim.force()
	for i := range 7 {
		tbl.get(fmt.Sprintf("idle%d", i), t0.Add(time.Duration(i+1)*time.Millisecond))
	}
	tbl.get("new", t0.Add(time.Second)) // full: evicts max/8 = 1
	if tbl.lookup("busy") == nil {
		t.Error("the busy host was evicted before idle ones")
	}
	if tbl.lookup("idle0") != nil {
		t.Error("idle0, the least recently used idle host, is still tracked")
	}
	if tbl.lookup("idle1") == nil || tbl.lookup("new") == nil {
		t.Error("more than one host evicted to make room for one")
	}
}

// TestAdaptiveStateIsKeptForEveryTrackedHost: adaptive hedging keeps the
// learned state of as many hosts as the engine tracks (issue 24's third
// defect: with MaxKeys 64 and 60 hosts, 13 were evicted).
func TestAdaptiveStateIsKeptForEveryTrackedHost(t *testing.T) {
	e := NewEngine(EngineConfig{Adaptive: &AdaptiveHedging{MaxExtraLoad: 0.05}, MaxKeys: 64})
	op := &countOp{}
	for i := range 60 {
		Execute(t.Context(), e, Call[int]{Key: fmt.Sprintf("h%d", i), Op: op,
			Policy: Policy{MaxAttempts: 2, MaxHedges: 1, Adaptive: true}})
	}
	st := e.Stats()
	n := 0
	for _, h := range st.Hosts {
		if h.HedgeDelay > 0 {
			n++
		}
	}
	if len(st.Hosts) != 60 || n != 60 {
		t.Errorf("%d hosts tracked, %d with a hedge delay; want all 60", len(st.Hosts), n)
	}
}

// countOp answers every attempt at once.
type countOp struct{}

func (*countOp) Prepare(n int) (int, EndReason, error)        { return n, 0, nil }
func (*countOp) Do(context.Context, AttemptInfo) (int, error) { return 1, nil }
func (*countOp) Classify(int, error, AttemptInfo) Verdict     { return Verdict{} }
func (*countOp) Retain(_ context.Context, v int) int          { return v }
func (*countOp) Release(int)                                  {}
