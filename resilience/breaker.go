package resilience

// This file is over 400 lines because it is one concern: the breaker's
// state machine and the bounded, sharded set that holds one per key
// (eviction included); splitting the two would put the lock rules they share
// in two places.

import (
	"fmt"
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// BreakerState is the state of one circuit breaker.
type BreakerState int

// The breaker states.
const (
	BreakerClosed   BreakerState = iota // requests flow; failures are counted
	BreakerOpen                         // requests are rejected until OpenDuration passes
	BreakerHalfOpen                     // a few probe requests decide whether to close
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// Breaker defaults, used for zero fields of BreakerConfig.
const (
	DefaultFailureThreshold = 5
	DefaultOpenDuration     = 30 * time.Second
	DefaultHalfOpenProbes   = 1
	DefaultMaxBreakers      = 10000
)

// BreakerConfig configures the circuit breakers. Zero fields take the
// defaults above.
type BreakerConfig struct {
	// FailureThreshold is the number of consecutive failures that opens a
	// closed breaker. Default 5. A threshold above 2^30 (about a billion)
	// acts as 2^30: the count shares one atomic word with the state.
	FailureThreshold int
	// OpenDuration is how long an open breaker rejects requests before it
	// admits probes. Default 30s.
	OpenDuration time.Duration
	// HalfOpenProbes is how many probe requests a half-open breaker admits at
	// once. Default 1.
	HalfOpenProbes int
	// MaxBreakers bounds how many keys (hosts) are tracked. Default 10000.
	// Keys are spread by hash over 16 shards of MaxBreakers/16 breakers
	// each (one shard of MaxBreakers when it is below 64), and room is made
	// within the new key's shard: about an eighth of it is evicted, idle
	// closed breakers first, then closed ones counting failures, then
	// half-open ones (or open ones whose OpenDuration has ended), least
	// recently used first in each group.
	//
	// An open breaker is never evicted before its OpenDuration ends, so it
	// keeps rejecting. When every breaker in the new key's shard is open, the
	// new key is served untracked: admitted as if its breaker were closed,
	// with nothing recorded (it cannot open), until an OpenDuration ends and
	// room can be made. transport.Transport.UntrackedAdmissions counts those
	// admissions.
	MaxBreakers int
}

// withDefaults validates c and fills zero fields; it panics naming the field
// when a value makes no sense.
func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.FailureThreshold < 0 {
		panic(fmt.Sprintf("resilience: BreakerConfig.FailureThreshold must not be negative, got %d", c.FailureThreshold))
	}
	if c.OpenDuration < 0 {
		panic(fmt.Sprintf("resilience: BreakerConfig.OpenDuration must not be negative, got %v", c.OpenDuration))
	}
	if c.HalfOpenProbes < 0 {
		panic(fmt.Sprintf("resilience: BreakerConfig.HalfOpenProbes must not be negative, got %d", c.HalfOpenProbes))
	}
	if c.MaxBreakers < 0 {
		panic(fmt.Sprintf("resilience: BreakerConfig.MaxBreakers must not be negative, got %d", c.MaxBreakers))
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	if c.OpenDuration == 0 {
		c.OpenDuration = DefaultOpenDuration
	}
	if c.HalfOpenProbes == 0 {
		c.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if c.MaxBreakers == 0 {
		c.MaxBreakers = DefaultMaxBreakers
	}
	return c
}

// outcome is what one admitted attempt tells its breaker.
type outcome int

// Outcomes reported to a breaker.
const (
	outcomeIgnore  outcome = iota // neither success nor failure (caller cancelled, non-retryable error)
	outcomeSuccess                // a non-retryable result
	outcomeFailure                // a retryable result
)

// transition is a breaker state change, to be reported once no lock is held.
type transition struct {
	Key      string
	From, To BreakerState
}

// Changed reports whether t records a change.
func (t transition) Changed() bool { return t.From != t.To }

// ticket is an admission by a breaker; hand it back with Done. The zero
// ticket (no breaker) accepts Done as a no-op.
type ticket struct {
	b     *breaker
	gen   uint32 // the breaker's generation when it admitted
	probe bool
}

// Probe reports whether the ticket admits a half-open probe.
func (t ticket) Probe() bool { return t.probe }

// breakerSet is a bounded set of circuit breakers, one per key. State is
// evaluated lazily when it is read: there are no timers and no background
// goroutines. Safe for concurrent use.
//
// The common path takes no lock and writes no word that another core is
// writing: finding a tracked key's breaker is a sync.Map lookup, admitting
// through a closed breaker reads one atomic word, and a success there writes
// that word only when it has failures to forget. Locks are taken to add a
// key (and evict to make room), to change a breaker's state, to admit or
// settle a half-open probe, and to record the failure that opens a breaker.
type breakerSet struct {
	cfg       BreakerConfig
	threshold uint32 // cfg.FailureThreshold, at most maxFailures+1
	seed      maphash.Seed
	shards    []breakerShard
	shardCap  int
	// clk, when set (by the engine), is read for the exact time wherever
	// a breaker changes or is created: callers may then pass a coarse time
	// (the current second), which only the closed, lock-free path uses.
	clk clock.Clock
	// last is the breaker most recently found by get, checked before any
	// hashing: a transport that calls one host (the common case) finds its
	// breaker with one string comparison. It is replaced only when the
	// breaker in it is gone or was not used in the current second, so
	// calls to several hosts at once do not keep rewriting it.
	last      atomic.Pointer[breaker]
	_         [64]byte      // read on every call above, written rarely below
	untracked atomic.Uint64 // admissions served untracked; see MaxBreakers
}

// breakerShard holds the breakers of the keys that hash to it. It is 128
// bytes, so that the shards of one slice (an allocation whose size class is
// a multiple of 64) never share a cache line: a shard written to add a key
// does not slow lookups in its neighbours.
type breakerShard struct {
	// m maps a key to its *breaker. Lookups take no lock; m is written only
	// with mu held, so a writer sees it stable.
	m  sync.Map
	mu sync.RWMutex
	n  int // keys in m; guarded by mu
	// fullUntil, when set, is the earliest end of an OpenDuration among the
	// shard's breakers, found when the shard was full and all of them were
	// open. Until then none can be evicted (a breaker leaves the open state
	// only when its OpenDuration ends), so a new key is served untracked
	// without another scan. Guarded by mu.
	fullUntil time.Time
	_         [24]byte
}

// breaker is the state machine for one key.
//
// Its state lives in word, so that a closed breaker admits and records a
// success with atomics alone. Every change of state, and every write of the
// fields under mu, is made with mu held; the only write to word made without
// mu is a success in the closed state clearing the failure count, by
// compare-and-swap against the generation it was admitted in. So with mu
// held the state and generation hold still, and only the failure count of a
// closed breaker can drop to zero underfoot: writers under mu use
// compare-and-swap too.
type breaker struct {
	key      string        // immutable
	word     atomic.Uint64 // a breakerWord: state, failures, generation
	lastUsed atomic.Int64  // unix nanos of an admission at most lastUsedGrain old; for eviction
	evicted  atomic.Bool   // removed from its shard: breakerSet.last must not return it

	mu       sync.Mutex // guards the fields below
	openedAt time.Time  // when the breaker last opened
	since    time.Time  // when it entered its state (for a lazily half-open one, openedAt+OpenDuration)
	probes   int        // probes in flight, whatever state they were admitted in
}

// lastUsedGrain is how stale a breaker's lastUsed may be. Admissions within
// it of the stored time leave it alone, so that a busy host's admissions do
// not all write one word; eviction's least-recently-used order is exact to
// this grain.
const lastUsedGrain = int64(time.Millisecond)

// A breakerWord packs a breaker's state in its low stateBits bits, its
// consecutive failures while closed in the next failureBits, and its
// generation, bumped on every state change so that results of attempts
// admitted before it are dropped, in the high 32. The generation wraps after
// 2^32 changes; a ticket would have to be held across a whole multiple of
// that to be mistaken for a current one.
type breakerWord uint64

const (
	stateBits   = 2
	failureBits = 30
	maxFailures = 1<<failureBits - 1
	genShift    = stateBits + failureBits
)

func (w breakerWord) state() BreakerState { return BreakerState(w & (1<<stateBits - 1)) }
func (w breakerWord) failures() uint32    { return uint32(w>>stateBits) & maxFailures }
func (w breakerWord) gen() uint32         { return uint32(w >> genShift) }

// withFailures returns w counting n consecutive failures (n ≤ maxFailures).
func (w breakerWord) withFailures(n uint32) breakerWord {
	return w&^(maxFailures<<stateBits) | breakerWord(n)<<stateBits
}

// moved returns the word of the next generation, in state s with no failures.
func (w breakerWord) moved(s BreakerState) breakerWord {
	return breakerWord(w.gen()+1)<<genShift | breakerWord(s)
}

func (br *breaker) load() breakerWord { return breakerWord(br.word.Load()) }

func (br *breaker) cas(old, new breakerWord) bool {
	return br.word.CompareAndSwap(uint64(old), uint64(new))
}

// moveLocked changes the state from the one in old to s, entered at since,
// starting a new generation. It reports false, changing nothing, if the word
// is no longer old. Requires br.mu held.
func (br *breaker) moveLocked(old breakerWord, s BreakerState, since time.Time) bool {
	if !br.cas(old, old.moved(s)) {
		return false
	}
	br.since = since
	if s == BreakerOpen {
		br.openedAt = since
	}
	return true // probes in flight keep their slots until they complete
}

// touch records an admission at now for eviction, unless the stored time is
// within lastUsedGrain of it.
func (br *breaker) touch(now time.Time) {
	ns := now.UnixNano()
	if d := ns - br.lastUsed.Load(); d >= lastUsedGrain || d <= -lastUsedGrain {
		br.lastUsed.Store(ns)
	}
}

// newBreakerSet returns an empty set configured by cfg (zero fields take their
// defaults). It panics if a field is negative.
func newBreakerSet(cfg BreakerConfig) *breakerSet {
	cfg = cfg.withDefaults()
	n := 16
	if cfg.MaxBreakers < 64 {
		n = 1
	}
	b := &breakerSet{cfg: cfg, seed: maphash.MakeSeed(), shards: make([]breakerShard, n)}
	b.threshold = uint32(min(cfg.FailureThreshold, maxFailures+1))
	b.shardCap = max(1, cfg.MaxBreakers/n)
	return b
}

// exact returns the exact time for a transition or a new breaker: from clk
// when set, else now as the caller passed it.
func (b *breakerSet) exact(now time.Time) time.Time {
	if b.clk != nil {
		return b.clk.Now()
	}
	return now
}

// Config returns the effective configuration, defaults filled in.
func (b *breakerSet) Config() BreakerConfig { return b.cfg }

func (b *breakerSet) shard(key string) *breakerShard {
	if len(b.shards) == 1 {
		return &b.shards[0]
	}
	return &b.shards[maphash.String(b.seed, key)%uint64(len(b.shards))]
}

// lookup returns key's breaker, or nil if it is not tracked. It takes no lock.
func (s *breakerShard) lookup(key string) *breaker {
	if v, ok := s.m.Load(key); ok {
		return v.(*breaker)
	}
	return nil
}

// get returns key's breaker, creating (and evicting to make room) if needed.
// It returns nil when the key's shard is full of open breakers: the key is
// then served untracked (see BreakerConfig.MaxBreakers).
func (b *breakerSet) get(key string, now time.Time) *breaker {
	if br := b.last.Load(); br != nil && br.key == key && !br.evicted.Load() {
		return br
	}
	br := b.find(key, now)
	if br != nil {
		b.remember(br, now)
	}
	return br
}

// remember makes br the one get checks first, unless the breaker there is
// still tracked and was used within the current second (the times are
// those of admissions, which may be the current second: see clk).
func (b *breakerSet) remember(br *breaker, now time.Time) {
	old := b.last.Load()
	if old == br {
		return
	}
	if old != nil && !old.evicted.Load() && now.UnixNano()-old.lastUsed.Load() < int64(time.Second) {
		return
	}
	b.last.Store(br)
}

// find is get without the one-entry cache.
func (b *breakerSet) find(key string, now time.Time) *breaker {
	s := b.shard(key)
	if br := s.lookup(key); br != nil {
		return br
	}
	s.mu.RLock()
	br := s.lookup(key) // added since the lookup above?
	full := br == nil && now.Before(s.fullUntil)
	s.mu.RUnlock()
	if br != nil {
		return br
	}
	if full {
		return nil
	}
	now = b.exact(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if existing := s.lookup(key); existing != nil {
		return existing
	}
	if s.n >= b.shardCap && !s.evictLocked(b.shardCap, now, b.cfg.OpenDuration) {
		return nil
	}
	br = &breaker{key: key, since: now}
	br.lastUsed.Store(now.UnixNano())
	s.m.Store(key, br)
	s.n++
	return br
}

// evictLocked removes up to about an eighth of the shard, least recently
// used first among idle closed breakers, then failing closed ones, then
// half-open ones; it never removes a breaker that is open at now. It reports
// whether it removed any; when it removed none (every breaker is open) it
// sets s.fullUntil. Requires s.mu held.
func (s *breakerShard) evictLocked(capacity int, now time.Time, openFor time.Duration) bool {
	type cand struct {
		br    *breaker
		rank  int // 0 idle closed, 1 failing closed, 2 half-open (or open past openFor)
		stamp int64
	}
	cands := make([]cand, 0, s.n)
	var until time.Time
	s.m.Range(func(_, v any) bool {
		br := v.(*breaker)
		br.mu.Lock()
		w, ends := br.load(), br.openedAt.Add(openFor)
		br.mu.Unlock()
		rank := 2
		switch {
		case w.state() == BreakerOpen && now.Before(ends):
			if until.IsZero() || ends.Before(until) {
				until = ends
			}
			return true // still rejecting: never evicted
		case w.state() == BreakerClosed && w.failures() == 0:
			rank = 0
		case w.state() == BreakerClosed:
			rank = 1
		}
		cands = append(cands, cand{br, rank, br.lastUsed.Load()})
		return true
	})
	if len(cands) == 0 {
		s.fullUntil = until
		return false
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].stamp < cands[j].stamp
	})
	n := max(1, capacity/8)
	for i := 0; i < n && i < len(cands); i++ {
		cands[i].br.evicted.Store(true) // before it leaves m: see breakerSet.last
		s.m.Delete(cands[i].br.key)
		s.n--
	}
	return true
}

// Untracked returns how many admissions were served untracked because every
// breaker in the key's shard was open (see BreakerConfig.MaxBreakers). It
// only grows; export it as a counter.
func (b *breakerSet) Untracked() uint64 { return b.untracked.Load() }

// Len returns the number of tracked keys.
func (b *breakerSet) Len() int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.RLock()
		n += s.n
		s.mu.RUnlock()
	}
	return n
}

// State returns key's state at now; an untracked key is closed.
func (b *breakerSet) State(key string, now time.Time) BreakerState {
	br := b.shard(key).lookup(key)
	if br == nil {
		return BreakerClosed
	}
	if w := br.load(); w.state() == BreakerClosed {
		return BreakerClosed
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	st := br.load().state()
	if st == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
		return BreakerHalfOpen // what the next admission will see
	}
	return st
}

// Each calls fn with every tracked key, its state at now and when it
// entered that state. fn runs without any breaker lock held; states may
// change while Each runs.
func (b *breakerSet) Each(now time.Time, fn func(key string, state BreakerState, since time.Time)) {
	type kv struct {
		k     string
		s     BreakerState
		since time.Time
	}
	var snap []kv
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.RLock()
		s.m.Range(func(_, v any) bool {
			br := v.(*breaker)
			br.mu.Lock()
			st, since := br.load().state(), br.since
			if st == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
				st, since = BreakerHalfOpen, br.openedAt.Add(b.cfg.OpenDuration)
			}
			br.mu.Unlock()
			snap = append(snap, kv{br.key, st, since})
			return true
		})
		s.mu.RUnlock()
	}
	for _, e := range snap {
		fn(e.k, e.s, e.since)
	}
}

// Admit asks key's breaker to admit the first attempt of a request. A closed
// breaker admits; an open one rejects with ErrCircuitOpen until OpenDuration
// has passed, then turns half-open and admits up to HalfOpenProbes probes at
// once. The returned transition (if Changed) must be reported by the caller
// after Admit returns.
func (b *breakerSet) admit(key string, now time.Time) (ticket, transition, error) {
	return b.allow(key, now, true)
}

// AdmitRetry asks key's breaker to admit a later attempt of a request that is
// already running (a retry or hedge). Only a closed breaker admits: a
// half-open breaker's probes are whole requests, not retries.
func (b *breakerSet) admitRetry(key string, now time.Time) (ticket, transition, error) {
	return b.allow(key, now, false)
}

func (b *breakerSet) allow(key string, now time.Time, admission bool) (ticket, transition, error) {
	br := b.get(key, now)
	if br == nil {
		b.untracked.Add(1)
		return ticket{}, transition{Key: key}, nil // served untracked: as if closed, nothing recorded
	}
	br.touch(now)
	if w := br.load(); w.state() == BreakerClosed {
		return ticket{b: br, gen: w.gen()}, transition{Key: key}, nil
	}
	return b.allowLocked(br, now, admission)
}

// allowLocked is allow for a breaker that was not closed when it looked:
// open ones may turn half-open, half-open ones admit probes.
func (b *breakerSet) allowLocked(br *breaker, now time.Time, admission bool) (ticket, transition, error) {
	now = b.exact(now)
	br.mu.Lock()
	defer br.mu.Unlock()
	w := br.load()
	tr := transition{Key: br.key, From: w.state(), To: w.state()}
	for w.state() == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
		// Only a holder of mu writes an open breaker's word, so this move
		// succeeds the first time.
		if br.moveLocked(w, BreakerHalfOpen, br.openedAt.Add(b.cfg.OpenDuration)) {
			tr.To = BreakerHalfOpen
		}
		w = br.load()
	}
	switch {
	case w.state() == BreakerClosed: // closed by a probe while this call waited for mu
		return ticket{b: br, gen: w.gen()}, tr, nil
	case w.state() == BreakerHalfOpen && admission && br.probes < b.cfg.HalfOpenProbes:
		br.probes++
		return ticket{b: br, gen: w.gen(), probe: true}, tr, nil
	}
	return ticket{}, tr, &CircuitOpenError{Key: br.key, State: w.state()}
}

// Done reports the outcome of an admitted attempt. Results from a previous
// generation (the breaker changed state since the ticket was issued) are
// dropped. A probe's slot is released whatever the outcome.
func (b *breakerSet) done(t ticket, o outcome, now time.Time) transition {
	br := t.b
	if br == nil {
		return transition{}
	}
	if t.probe {
		return b.doneLocked(t, o, now)
	}
	// A ticket that is not a probe was issued by a closed breaker: while the
	// generation is still the ticket's, the breaker is closed.
	for {
		w := br.load()
		if w.gen() != t.gen {
			return transition{Key: br.key, From: w.state(), To: w.state()} // stale
		}
		switch o {
		case outcomeSuccess:
			if w.failures() == 0 || br.cas(w, w.withFailures(0)) {
				return transition{Key: br.key}
			}
		case outcomeFailure:
			if w.failures()+1 >= b.threshold {
				return b.doneLocked(t, o, now) // this failure opens the breaker
			}
			if br.cas(w, w.withFailures(w.failures()+1)) {
				return transition{Key: br.key}
			}
		default:
			return transition{Key: br.key}
		}
	}
}

// doneLocked is done for a probe, and for the failure that may open a
// closed breaker, with br.mu held.
func (b *breakerSet) doneLocked(t ticket, o outcome, now time.Time) transition {
	now = b.exact(now)
	br := t.b
	br.mu.Lock()
	defer br.mu.Unlock()
	if t.probe {
		// A probe holds its slot until it completes, whatever happened to
		// the breaker meanwhile, so probes in flight never pile up.
		br.probes--
	}
	for {
		w := br.load()
		tr := transition{Key: br.key, From: w.state(), To: w.state()}
		if w.gen() != t.gen || o == outcomeIgnore {
			return tr
		}
		to := BreakerOpen
		switch {
		case w.state() == BreakerOpen: // no ticket is issued while open
			return tr
		case w.state() == BreakerClosed && o == outcomeSuccess:
			if w.failures() == 0 || br.cas(w, w.withFailures(0)) {
				return tr
			}
			continue
		case w.state() == BreakerClosed && w.failures()+1 < b.threshold:
			// A success cleared the count since done looked.
			if br.cas(w, w.withFailures(w.failures()+1)) {
				return tr
			}
			continue
		case w.state() == BreakerHalfOpen && o == outcomeSuccess:
			to = BreakerClosed
		}
		// A failure at the threshold, or a probe's verdict: the one caller
		// whose compare-and-swap moves the word reports the transition.
		if br.moveLocked(w, to, now) {
			tr.To = to
			return tr
		}
	}
}
