package resilience

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"pgregory.net/rapid"
)

func TestBreakerStateString(t *testing.T) {
	for s, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open", 7: "BreakerState(7)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}

func TestBreakerConfigDefaults(t *testing.T) {
	got := newBreakerSet(BreakerConfig{}, nil).Config()
	want := BreakerConfig{FailureThreshold: DefaultFailureThreshold, OpenDuration: DefaultOpenDuration, HalfOpenProbes: DefaultHalfOpenProbes}
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
}

func TestBreakerConfigRejectsNegatives(t *testing.T) {
	for _, c := range []struct {
		cfg  BreakerConfig
		want string
	}{
		{BreakerConfig{FailureThreshold: -1}, "FailureThreshold"},
		{BreakerConfig{OpenDuration: -time.Second}, "OpenDuration"},
		{BreakerConfig{HalfOpenProbes: -2}, "HalfOpenProbes"},
	} {
		if msg := panicMessage(func() { newBreakerSet(c.cfg, nil) }); !strings.Contains(msg, c.want) {
			t.Errorf("panic %q does not name %s", msg, c.want)
		}
	}
}

// fail admits and fails one attempt at now, returning the transitions seen.
func fail(t *testing.T, b *breakerSet, key string, now time.Time) []transition {
	t.Helper()
	tk, tr, err := b.admit(key, now)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return []transition{tr, b.done(tk, outcomeFailure, when(now))}
}

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 3, OpenDuration: time.Second}, nil)
	fail(t, b, "h", t0)
	fail(t, b, "h", t0)
	// A success resets the count.
	tk, _, _ := b.admit("h", t0)
	b.done(tk, outcomeSuccess, when(t0))
	fail(t, b, "h", t0)
	fail(t, b, "h", t0)
	if s := b.State("h", t0); s != BreakerClosed {
		t.Fatalf("state after 2 consecutive failures = %v", s)
	}
	trs := fail(t, b, "h", t0)
	if trs[1] != (transition{Key: "h", From: BreakerClosed, To: BreakerOpen}) {
		t.Fatalf("transition = %+v", trs[1])
	}
	_, _, err := b.admit("h", t0.Add(999*time.Millisecond))
	var coe *CircuitOpenError
	if !errors.Is(err, ErrCircuitOpen) || !errors.As(err, &coe) || coe.State != BreakerOpen || coe.Key != "h" {
		t.Fatalf("Admit while open: %v", err)
	}
}

func TestBreakerIgnoredOutcomesDoNotCount(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1}, nil)
	tk, _, _ := b.admit("h", t0)
	b.done(tk, outcomeIgnore, when(t0))
	if s := b.State("h", t0); s != BreakerClosed {
		t.Fatalf("state = %v", s)
	}
}

func TestBreakerHalfOpenProbes(t *testing.T) {
	cfg := BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second, HalfOpenProbes: 2}
	b := newBreakerSet(cfg, nil)
	fail(t, b, "h", t0)
	later := t0.Add(time.Second)
	p1, tr, err := b.admit("h", later)
	if err != nil || !p1.Probe() || tr != (transition{Key: "h", From: BreakerOpen, To: BreakerHalfOpen}) {
		t.Fatalf("first probe: %v %+v %v", p1, tr, err)
	}
	p2, _, err := b.admit("h", later)
	if err != nil || !p2.Probe() {
		t.Fatalf("second probe refused: %v", err)
	}
	if _, _, err := b.admit("h", later); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("third concurrent probe admitted: %v", err)
	}
	if _, _, err := b.admitRetry("h", later); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("a retry was admitted while half-open: %v", err)
	}
	// An ignored probe frees its slot without deciding.
	b.done(p2, outcomeIgnore, when(later))
	p3, _, err := b.admit("h", later)
	if err != nil || !p3.Probe() {
		t.Fatalf("freed slot not reusable: %v", err)
	}
	if tr := b.done(p1, outcomeSuccess, when(later)); tr.To != BreakerClosed {
		t.Fatalf("probe success: %+v", tr)
	}
	// p3 belonged to the half-open generation: its late failure is stale.
	if tr := b.done(p3, outcomeFailure, when(later)); tr.Changed() || b.State("h", later) != BreakerClosed {
		t.Fatalf("stale probe result changed state: %+v", tr)
	}
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second}, nil)
	fail(t, b, "h", t0)
	at := t0.Add(time.Second)
	p, _, _ := b.admit("h", at)
	if tr := b.done(p, outcomeFailure, when(at)); tr.To != BreakerOpen {
		t.Fatalf("probe failure: %+v", tr)
	}
	if _, _, err := b.admit("h", at.Add(999*time.Millisecond)); err == nil {
		t.Fatal("re-opened breaker admitted before OpenDuration")
	}
}

func TestBreakerStaleClosedResultsIgnored(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second}, nil)
	old, _, _ := b.admit("h", t0)
	fail(t, b, "h", t0) // opens
	if tr := b.done(old, outcomeSuccess, when(t0)); tr.Changed() || b.State("h", t0) != BreakerOpen {
		t.Fatalf("a result from before the breaker opened closed it: %+v", tr)
	}
}

func TestBreakersAreBounded(t *testing.T) {
	b := newBreakerSet(BreakerConfig{}, newHostTable(1000))
	for i := 0; i < 100000; i++ {
		tk, _, _ := b.admit(fmt.Sprintf("host-%d", i), t0.Add(time.Duration(i)))
		b.done(tk, outcomeSuccess, when(t0))
	}
	if n := b.Len(); n > 1000 {
		t.Fatalf("tracking %d breakers, bound 1000", n)
	}
}

func TestBreakersEvictIdleClosedBeforeOpen(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}, newHostTable(8))
	fail(t, b, "bad", t0)
	for i := 0; i < 100; i++ {
		if _, _, err := b.admit(fmt.Sprintf("h%d", i), t0.Add(time.Duration(i+1))); err != nil {
			t.Fatalf("Admit h%d: %v", i, err)
		}
	}
	if s := b.State("bad", t0); s != BreakerOpen {
		t.Fatalf("open breaker evicted in favour of idle ones: %v", s)
	}
}

func TestBreakersEach(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1}, nil)
	fail(t, b, "a", t0)
	if _, _, err := b.admit("b", t0); err != nil {
		t.Fatalf("Admit b: %v", err)
	}
	got := map[string]BreakerState{}
	b.Each(t0, func(k string, s BreakerState, _ time.Time) { got[k] = s })
	if len(got) != 2 || got["a"] != BreakerOpen || got["b"] != BreakerClosed {
		t.Fatalf("Each = %v", got)
	}
}

// TestBreakersEachSince: Each says when each breaker entered its state; a
// breaker whose open period ended is half-open since it ended, before any
// admission moves it.
func TestBreakersEachSince(t *testing.T) {
	const open = time.Minute
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1, OpenDuration: open}, nil)
	if _, _, err := b.admit("b", t0); err != nil {
		t.Fatal(err)
	}
	fail(t, b, "a", t0.Add(time.Second))
	type st struct {
		s     BreakerState
		since time.Time
	}
	each := func(now time.Time) map[string]st {
		got := map[string]st{}
		b.Each(now, func(k string, s BreakerState, since time.Time) { got[k] = st{s, since} })
		return got
	}
	got := each(t0.Add(2 * time.Second))
	if want := (st{BreakerOpen, t0.Add(time.Second)}); got["a"] != want {
		t.Errorf("a = %+v, want %+v", got["a"], want)
	}
	if want := (st{BreakerClosed, t0}); got["b"] != want {
		t.Errorf("b = %+v, want %+v", got["b"], want)
	}
	if got, want := each(t0.Add(2 * open))["a"], (st{BreakerHalfOpen, t0.Add(time.Second + open)}); got != want {
		t.Errorf("a after its open period = %+v, want %+v", got, want)
	}
}

// TestBreakerProperties drives one breaker with arbitrary interleavings of
// admissions, outcomes and time, and checks the invariants: never more
// concurrent probes than HalfOpenProbes, and nothing admitted while open
// before OpenDuration has passed since it opened.
func TestBreakerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := BreakerConfig{
			FailureThreshold: rapid.IntRange(1, 4).Draw(t, "threshold"),
			OpenDuration:     time.Duration(rapid.IntRange(1, 10).Draw(t, "open")) * time.Second,
			HalfOpenProbes:   rapid.IntRange(1, 3).Draw(t, "probes"),
		}
		b := newBreakerSet(cfg, nil)
		now := t0
		var held []ticket
		var openedAt time.Time
		for i, n := 0, rapid.IntRange(1, 200).Draw(t, "steps"); i < n; i++ {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				tk, _, err := b.admit("k", now)
				if err == nil {
					if !openedAt.IsZero() && now.Sub(openedAt) < cfg.OpenDuration {
						t.Fatalf("admitted %v after opening at %v (OpenDuration %v)", now, openedAt, cfg.OpenDuration)
					}
					held = append(held, tk)
				}
			case 1:
				if len(held) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(held)-1).Draw(t, "which")
				tk := held[j]
				held = append(held[:j], held[j+1:]...)
				o := outcome(rapid.IntRange(0, 2).Draw(t, "outcome"))
				tr := b.done(tk, o, when(now))
				switch {
				case tr.To == BreakerOpen && tr.From != BreakerOpen:
					openedAt = now
				case tr.To == BreakerClosed:
					openedAt = time.Time{}
				}
			case 2:
				now = now.Add(time.Duration(rapid.IntRange(0, 4000).Draw(t, "ms")) * time.Millisecond)
			}
			probes := 0
			br := &b.hosts.get("k", when(now)).br
			br.mu.Lock()
			if br.load().state() == BreakerHalfOpen {
				probes = br.probes
			}
			br.mu.Unlock()
			if probes > cfg.HalfOpenProbes {
				t.Fatalf("%d probes in flight, limit %d", probes, cfg.HalfOpenProbes)
			}
		}
	})
}

func TestBreakersConcurrentUse(t *testing.T) {
	b := newBreakerSet(BreakerConfig{FailureThreshold: 3, OpenDuration: time.Millisecond}, newHostTable(64))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				tk, _, err := b.admit(fmt.Sprintf("h%d", (g*i)%100), now)
				if err == nil {
					b.done(tk, outcome(i%3), when(now))
				}
			}
		}(g)
	}
	wg.Wait()
	if b.Len() > 64 {
		t.Fatalf("Len = %d over bound", b.Len())
	}
}

// TestBreakersNeverEvictOpenBeforeOpenDuration: when every tracked breaker is
// open, a new key is served untracked (and counted) instead of evicting one
// that still rejects; once an OpenDuration ends, room is made as usual.
func TestBreakersNeverEvictOpenBeforeOpenDuration(t *testing.T) {
	fc := fakeclock.New(t0)
	b := newBreakerSet(BreakerConfig{FailureThreshold: 1, OpenDuration: 10 * time.Second}, newHostTable(2))
	fail(t, b, "a", fc.Now())
	fc.Advance(time.Second)
	fail(t, b, "b", fc.Now())
	fc.Advance(time.Second)

	for i := 0; i < 3; i++ {
		tk, tr, err := b.admit("c", fc.Now())
		if err != nil || tr.Changed() {
			t.Fatalf("Admit(c) with every breaker open: %v, %+v; want admitted untracked", err, tr)
		}
		if tr := b.done(tk, outcomeFailure, when(fc.Now())); tr.Changed() {
			t.Fatalf("an untracked key's failure changed a breaker: %+v", tr)
		}
	}
	if got := b.Untracked(); got != 3 {
		t.Errorf("Untracked() = %d, want 3", got)
	}
	if got := b.State("c", fc.Now()); got != BreakerClosed {
		t.Errorf("State(c) = %v, want closed (untracked)", got)
	}
	if n := b.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2", n)
	}
	for _, k := range []string{"a", "b"} {
		if _, _, err := b.admit(k, fc.Now()); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("Admit(%s) before its OpenDuration ended: %v, want ErrCircuitOpen", k, err)
		}
	}

	// a's OpenDuration ends: it may go, and c is tracked in its place.
	fc.Advance(8 * time.Second)
	if _, _, err := b.admit("c", fc.Now()); err != nil {
		t.Fatalf("Admit(c): %v", err)
	}
	if got := b.Untracked(); got != 3 {
		t.Errorf("Untracked() = %d after room was made, want still 3", got)
	}
	if _, _, err := b.admit("b", fc.Now()); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("Admit(b), still within its OpenDuration: %v, want ErrCircuitOpen", err)
	}
	got := map[string]BreakerState{}
	b.Each(fc.Now(), func(k string, s BreakerState, _ time.Time) { got[k] = s })
	if want := map[string]BreakerState{"b": BreakerOpen, "c": BreakerClosed}; !maps.Equal(got, want) {
		t.Fatalf("tracked %v, want %v", got, want)
	}
}
