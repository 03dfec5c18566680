package resilience

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// hostTable is an engine's per-key state: one host per key, holding that
// key's circuit breaker, adaptive hedging state and concurrency limit, so
// that a call finds all three with one lookup. It is bounded: at most max
// keys are tracked, exactly. Safe for concurrent use.
//
// Finding a tracked key takes no lock (a sync.Map lookup). Adding one takes
// mu; when the table is full, exactly one host is evicted to make room, in
// this order: idle hosts (breaker closed with no failures), then hosts
// whose closed breaker counts failures, then half-open breakers (or open
// ones whose OpenDuration has ended), least recently used first within
// each group. Two kinds of host are never evicted: one with attempts in
// flight under its concurrency limit (evicting it would start the key
// afresh under a new limit while the old attempts are still out), and one
// whose breaker is open and still within its OpenDuration (so it keeps
// rejecting). When every host is of those kinds, a new key is served
// untracked (no breaker, no adaptive delay, no limit: see
// Stats.UntrackedAdmissions).
//
// Recency is exact: each use of a host that is not already the table's
// most recent takes the next number of a table-wide counter, so "least
// recently used" is the order of the uses themselves, not of a clock
// reading (a coarse one would tie every use within a second). A host used
// again while it is the most recent writes nothing, so a transport calling
// one host shares no written word between its calls.
//
// Finding the least recently used host is a scan of the table. To keep
// churn cheap, a scan ranks every evictable host and keeps the ranking
// (queue); the next additions evict from it, each after checking that the
// host is still tracked, unused since the scan and of the same group.
// Hosts used or added since the scan are more recent than every host the
// queue still holds, so the first one that passes is still the least
// recently used. A queue holds at most an eighth of the table, so a scan
// is paid for by that many additions.
type hostTable struct {
	max int
	// openFor is the breakers' OpenDuration (0 without breakers): a host
	// whose breaker opened less than openFor ago is not evicted.
	openFor time.Duration
	// newLimit, when set, gives each new host its concurrency limit.
	newLimit func() *limiter

	uses atomic.Uint64 // the recency counter: the number of the latest use

	m  sync.Map // key → *host; written only with mu held
	mu sync.Mutex
	n  int // hosts in m; guarded by mu
	// queue is the ranking of the last scan, best candidate first; guarded
	// by mu (see hostTable).
	queue []evictCand
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
	lastUsed atomic.Uint64 // the table's use number of its latest use; for eviction
	br       breaker
	hedge    atomic.Pointer[hedgeKey] // made on the first adaptive call
	lim      *limiter                 // nil without a concurrency limit
}

// touch records a use of h in t's recency order.
func (t *hostTable) touch(h *host) {
	if h.lastUsed.Load() != t.uses.Load() {
		h.lastUsed.Store(t.uses.Add(1))
	}
}

// newHostTable returns an empty table bounded by max (DefaultMaxKeys when
// 0).
func newHostTable(max int) *hostTable {
	if max == 0 {
		max = DefaultMaxKeys
	}
	return &hostTable{max: max}
}

// lookup returns key's host, or nil if it is not tracked. It takes no lock.
func (t *hostTable) lookup(key string) *host {
	if v, ok := t.m.Load(key); ok {
		return v.(*host)
	}
	return nil
}

// get returns key's host, adding it (and evicting to make room) if needed,
// and records the use. It returns nil when the key is served untracked.
// The time of the admission, in, is read only to add a key.
func (t *hostTable) get(key string, in *instant) *host {
	h := t.lookup(key)
	if h == nil {
		if h = t.add(key, in); h == nil {
			return nil
		}
	}
	t.touch(h)
	return h
}

// add is get's slow path: key was not found.
func (t *hostTable) add(key string, in *instant) *host {
	now := in.now() // before mu: its holders do not wait on a clock
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.lookup(key); h != nil {
		return h
	}
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
	h.lastUsed.Store(t.uses.Add(1))
	if t.newLimit != nil {
		h.lim = t.newLimit()
	}
	t.m.Store(key, h)
	t.n++
	return h
}

// evictCand is a host the last scan found evictable, with its group and
// its use number then.
type evictCand struct {
	h     *host
	rank  int
	stamp uint64
}

// evictLocked makes room for one host (see hostTable). It reports whether
// it removed one; when it could not it sets fullUntil. Requires t.mu held.
func (t *hostTable) evictLocked(now time.Time) bool {
	for pass := 0; pass < 2; pass++ {
		for len(t.queue) > 0 {
			c := t.queue[0]
			t.queue[0] = evictCand{}
			t.queue = t.queue[1:]
			if t.lookup(c.h.key) != c.h || c.h.lastUsed.Load() != c.stamp {
				continue // gone, or used since the scan: ranked again by the next
			}
			if rank, _, keep := c.h.evictRank(now, t.openFor); keep || rank != c.rank {
				continue
			}
			t.m.Delete(c.h.key)
			t.n--
			t.full.Store(false)
			return true
		}
		if pass == 0 && !t.scanLocked(now) {
			return false
		}
	}
	return false
}

// scanLocked ranks every evictable host into t.queue, keeping the best
// max/8 (at least one). It reports false, setting fullUntil, when no host
// may be evicted. Requires t.mu held.
func (t *hostTable) scanLocked(now time.Time) bool {
	cands := t.queue[:0]
	var until time.Time
	t.m.Range(func(_, v any) bool {
		h := v.(*host)
		rank, ends, keep := h.evictRank(now, t.openFor)
		if keep {
			if !ends.IsZero() && (until.IsZero() || ends.Before(until)) {
				until = ends
			}
			return true
		}
		cands = append(cands, evictCand{h, rank, h.lastUsed.Load()})
		return true
	})
	if len(cands) == 0 {
		t.queue = cands
		t.fullUntil = until
		t.full.Store(!until.IsZero())
		return false
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].stamp < cands[j].stamp
	})
	keep := max(1, t.max/8)
	if len(cands) > keep {
		clear(cands[keep:])
		cands = cands[:keep]
	}
	t.queue = cands
	return true
}

// evictRank places h in eviction order at now: 0 idle, 1 a closed breaker
// counting failures, 2 half-open; keep reports a host that must stay:
// attempts in flight under its limit, or a breaker that opened less than
// openFor ago (with the end of that OpenDuration in ends).
func (h *host) evictRank(now time.Time, openFor time.Duration) (rank int, ends time.Time, keep bool) {
	if h.lim != nil && h.lim.inFlight() > 0 {
		return 0, time.Time{}, true
	}
	br := &h.br
	br.mu.Lock()
	w, openedAt := br.load(), br.openedAt
	br.mu.Unlock()
	switch {
	case w.state() == BreakerOpen && now.Before(openedAt.Add(openFor)):
		return 0, openedAt.Add(openFor), true
	case w.state() != BreakerClosed:
		return 2, time.Time{}, false
	case w.failures() > 0:
		return 1, time.Time{}, false
	}
	return 0, time.Time{}, false
}

// untrackedCall counts one call served untracked.
func (t *hostTable) untrackedCall() { t.untracked.Add(1) }

// each calls fn with every tracked host, in key order, with no lock held.
// The hosts are those tracked at one moment (collected under mu, which
// every addition and eviction takes), so they are never more than the
// bound; they may be evicted while fn runs.
func (t *hostTable) each(fn func(h *host)) {
	t.mu.Lock()
	all := make([]*host, 0, t.n)
	t.m.Range(func(_, v any) bool {
		all = append(all, v.(*host))
		return true
	})
	t.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	for _, h := range all {
		fn(h)
	}
}
