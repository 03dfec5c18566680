package resilience

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// DefaultMaxKeys is how many keys (hosts, for the transport) an engine
// tracks when EngineConfig.MaxKeys is 0.
const DefaultMaxKeys = 10000

// hostTable is an engine's per-key state: one host per key, holding that
// key's circuit breaker, adaptive hedging state and concurrency limit, so
// that a call finds all three with one lookup. It is bounded: at most max
// keys are tracked, exactly. Safe for concurrent use.
//
// Finding a tracked key takes no lock (a sync.Map lookup). Adding one takes
// mu; when the table is full, room is made first by evicting about an
// eighth of it, in this order: idle hosts (breaker closed with no failures,
// nothing in flight under the limit), then busy ones (a closed breaker
// counting failures, or attempts in flight), then half-open breakers (or
// open ones whose OpenDuration has ended), least recently used first within
// each group. A host whose breaker is open and still within its
// OpenDuration is never evicted, so it keeps rejecting; when every host is
// such a one, a new key is served untracked (no breaker, no adaptive
// delay, no limit: see Stats.UntrackedAdmissions) until the first of those
// OpenDurations ends.
//
// An evicted host's state is dropped: in-flight attempts still settle on
// it, harmlessly, and the key starts afresh (closed, cold, at the initial
// limit) when it is next used.
type hostTable struct {
	max int
	// clk, when set (by the engine), is read for the exact time wherever a
	// host or a breaker changes: callers may then pass a coarse time (the
	// current second), which only lock-free paths use. Without it (tests of
	// the parts) the times passed are exact.
	clk clock.Clock
	// openFor is the breakers' OpenDuration (0 without breakers): a host
	// whose breaker opened less than openFor ago is not evicted.
	openFor time.Duration
	// newLimit, when set, gives each new host its concurrency limit.
	newLimit func() *limiter

	m  sync.Map // key → *host; written only with mu held
	mu sync.Mutex
	n  int // hosts in m; guarded by mu
	// fullUntil is set when the table was full and every host unevictable:
	// the earliest end of their OpenDurations. Before it, a new key is served
	// untracked without another scan. Guarded by mu.
	fullUntil time.Time
	full      atomic.Bool // fullUntil is set: read without mu on the lookup path

	untracked atomic.Uint64 // calls served untracked
}

// host is the state of one key. Its parts are used only when the engine
// has them configured.
type host struct {
	key      string
	lastUsed atomic.Int64 // unix nanos of a use at most lastUsedGrain old; for eviction
	br       breaker
	hedge    atomic.Pointer[hedgeKey] // made on the first adaptive call
	lim      *limiter                 // nil without a concurrency limit
}

// lastUsedGrain is how stale a host's lastUsed may be: uses within it of the
// stored time leave it alone, so that a busy host's calls do not all write
// one word. Eviction's least-recently-used order is exact to this grain, or
// to the second where callers pass the coarse current second (the engine's
// success path does).
const lastUsedGrain = int64(time.Millisecond)

// touch records a use at now for eviction.
func (h *host) touch(now time.Time) {
	ns := now.UnixNano()
	if d := ns - h.lastUsed.Load(); d >= lastUsedGrain || d <= -lastUsedGrain {
		h.lastUsed.Store(ns)
	}
}

// newHostTable returns an empty table bounded by max (DefaultMaxKeys when
// 0), reading exact times from clk (see hostTable.clk).
func newHostTable(max int, clk clock.Clock) *hostTable {
	if max == 0 {
		max = DefaultMaxKeys
	}
	return &hostTable{max: max, clk: clk}
}

// exact returns the exact time, given now as a caller passed it.
func (t *hostTable) exact(now time.Time) time.Time {
	if t.clk != nil {
		return t.clk.Now()
	}
	return now
}

// lookup returns key's host, or nil if it is not tracked. It takes no lock.
func (t *hostTable) lookup(key string) *host {
	if v, ok := t.m.Load(key); ok {
		return v.(*host)
	}
	return nil
}

// get returns key's host, adding it (and evicting to make room) if needed,
// and records the use at now. It returns nil when the key is served
// untracked. now may be coarse (the current second); the exact time is
// read wherever it matters.
func (t *hostTable) get(key string, now time.Time) *host {
	h := t.lookup(key)
	if h == nil {
		if h = t.add(key, now); h == nil {
			return nil
		}
	}
	h.touch(now)
	return h
}

// add is get's slow path: key was not found.
func (t *hostTable) add(key string, now time.Time) *host {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.lookup(key); h != nil {
		return h
	}
	now = t.exact(now)
	if t.n >= t.max {
		if t.full.Load() && now.Before(t.fullUntil) {
			return nil
		}
		if !t.evictLocked(now) {
			return nil
		}
	}
	h := &host{key: key}
	h.br.key = key
	h.br.since = now
	h.lastUsed.Store(now.UnixNano())
	if t.newLimit != nil {
		h.lim = t.newLimit()
	}
	t.m.Store(key, h)
	t.n++
	return h
}

// evictLocked makes room (see hostTable). It reports whether it removed
// any host; when it removed none it sets fullUntil. Requires t.mu held.
func (t *hostTable) evictLocked(now time.Time) bool {
	type cand struct {
		h     *host
		rank  int
		stamp int64
	}
	cands := make([]cand, 0, t.n)
	var until time.Time
	t.m.Range(func(_, v any) bool {
		h := v.(*host)
		rank, ends, keep := h.evictRank(now, t.openFor)
		if keep {
			if until.IsZero() || ends.Before(until) {
				until = ends
			}
			return true
		}
		cands = append(cands, cand{h, rank, h.lastUsed.Load()})
		return true
	})
	if len(cands) == 0 {
		t.fullUntil = until
		t.full.Store(true)
		return false
	}
	t.full.Store(false)
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].stamp < cands[j].stamp
	})
	n := max(1, t.max/8)
	for i := 0; i < n && i < len(cands); i++ {
		t.m.Delete(cands[i].h.key)
		t.n--
	}
	return true
}

// evictRank places h in eviction order at now: 0 idle, 1 busy, 2 half-open;
// keep reports a host that must stay (its breaker opened less than openFor
// ago), with the end of that OpenDuration.
func (h *host) evictRank(now time.Time, openFor time.Duration) (rank int, ends time.Time, keep bool) {
	br := &h.br
	br.mu.Lock()
	w, openedAt := br.load(), br.openedAt
	br.mu.Unlock()
	switch {
	case w.state() == BreakerOpen && now.Before(openedAt.Add(openFor)):
		return 0, openedAt.Add(openFor), true
	case w.state() != BreakerClosed:
		return 2, time.Time{}, false
	case w.failures() > 0 || (h.lim != nil && h.lim.inFlight() > 0):
		return 1, time.Time{}, false
	}
	return 0, time.Time{}, false
}

// untrackedCall counts one call served untracked.
func (t *hostTable) untrackedCall() { t.untracked.Add(1) }

// each calls fn with every tracked host, with no lock held; hosts may be
// added or evicted while it runs.
func (t *hostTable) each(fn func(h *host)) {
	var all []*host
	t.m.Range(func(_, v any) bool {
		all = append(all, v.(*host))
		return true
	})
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	for _, h := range all {
		fn(h)
	}
}
