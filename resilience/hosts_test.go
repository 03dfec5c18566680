package resilience

import (
	"context"
	"fmt"
	"sync"
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
		tbl := newHostTable(c.max)
		for i := range c.keys {
			if h := tbl.get(fmt.Sprintf("h%d", i), when(t0.Add(time.Duration(i)*time.Millisecond))); h == nil {
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
	tbl := newHostTable(8)
	tbl.newLimit = func() *limiter { return newLimiter(&cfg) }
	busy := tbl.get("busy", when(t0)) // oldest, but with an attempt in flight
	busy.lim.force()
	for i := range 7 {
		tbl.get(fmt.Sprintf("idle%d", i), when(t0.Add(time.Duration(i+1)*time.Millisecond)))
	}
	tbl.get("new", when(t0.Add(time.Second))) // full: evicts max/8 = 1
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
	e := newEngine(engineSpec{Adaptive: &AdaptiveHedging{MaxExtraLoad: 0.05}, MaxKeys: 64})
	op := &countOp{}
	for i := range 60 {
		Execute(t.Context(), e, Call[int]{Key: fmt.Sprintf("h%d", i), Op: op,
			Policy: Policy{MaxAttempts: 2, MaxHedges: 1}})
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

// TestHostTableRecencyIsExact: within one instant (the engine passes the
// current second), least recently used still means the order of the uses:
// the host used longest ago goes, not a coin flip among hosts of one
// second.
func TestHostTableRecencyIsExact(t *testing.T) {
	for trial := range 20 {
		tbl := newHostTable(4)
		for _, k := range []string{"a", "b", "c", "d"} {
			tbl.get(k, when(t0))
		}
		tbl.get("a", when(t0)) // a is now the most recent; b the least
		tbl.get("e", when(t0))
		if tbl.lookup("b") != nil {
			t.Fatalf("trial %d: b, the least recently used, is still tracked", trial)
		}
		for _, k := range []string{"a", "c", "d", "e"} {
			if tbl.lookup(k) == nil {
				t.Fatalf("trial %d: %s was evicted instead of b", trial, k)
			}
		}
	}
}

// TestHostTableEvictsOneHostForOne: adding a key to a full table evicts
// exactly one host, however large the table (a batch would drop hosts that
// nothing needed gone).
func TestHostTableEvictsOneHostForOne(t *testing.T) {
	tbl := newHostTable(64)
	for i := range 64 {
		tbl.get(fmt.Sprintf("h%d", i), when(t0))
	}
	for i := range 20 {
		tbl.get(fmt.Sprintf("new%d", i), when(t0))
		if n := tbl.Len(); n != 64 {
			t.Fatalf("after adding new%d: %d hosts tracked, want 64", i, n)
		}
		if tbl.lookup(fmt.Sprintf("h%d", i)) != nil {
			t.Fatalf("after adding new%d: h%d, the least recently used, is still tracked", i, i)
		}
	}
}

// TestEvictionKeepsAHostWithAttemptsInFlight: a host with attempts in
// flight under its limit is never evicted: its limit and in-flight count
// stay what the attempts out there hold, and Stats reports them.
func TestEvictionKeepsAHostWithAttemptsInFlight(t *testing.T) {
	e := newEngine(engineSpec{Limit: &ConcurrencyLimit{InitialLimit: 4}, MaxKeys: 1})
	gate := make(chan struct{})
	busy := &scripted{steps: []step{{gate: gate, v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Key: "busy", Op: busy, Policy: Policy{MaxAttempts: 1}})
	for inFlightOf(e, "busy") != 1 {
		time.Sleep(time.Millisecond)
	}
	for i := range 10 {
		Execute(context.Background(), e, Call[int]{Key: fmt.Sprintf("h%d", i), Op: &countOp{}, Policy: Policy{MaxAttempts: 1}})
	}
	st := e.Stats()
	h, ok := st.Host("busy")
	if !ok || h.InFlight != 1 {
		t.Fatalf("busy host after churn: tracked %v, in flight %d; want tracked with 1 in flight", ok, h.InFlight)
	}
	if st.UntrackedAdmissions != 10 {
		t.Errorf("%d calls served untracked, want the 10 that found the one slot busy", st.UntrackedAdmissions)
	}
	close(gate)
	<-done
	if n := inFlightOf(e, "busy"); n != 0 {
		t.Errorf("in flight after the attempt ended: %d, want 0", n)
	}
}

// TestStatsListsNoMoreHostsThanTheBound: a snapshot taken while keys churn
// lists at most MaxKeys hosts (a gauge of tracked hosts never reads above
// the bound).
func TestStatsListsNoMoreHostsThanTheBound(t *testing.T) {
	e := newEngine(engineSpec{Breaker: &BreakerConfig{}, MaxKeys: 8})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				Execute(context.Background(), e, Call[int]{Key: fmt.Sprintf("g%d-%d", g, i), Op: &countOp{}, Policy: Policy{MaxAttempts: 1}})
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for range 5000 {
		if n := len(e.Stats().Hosts); n > 8 {
			t.Fatalf("Stats listed %d hosts, bound 8", n)
		}
	}
}
