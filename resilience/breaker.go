package resilience

// This file is a little over 400 lines because it is one concern: the
// breaker's state machine and the bounded, sharded set that holds one per
// key (eviction included); splitting the two would put the lock rules they
// share in two places.

import (
	"fmt"
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"
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
	// closed breaker. Default 5.
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
	gen   uint64
	probe bool
}

// Probe reports whether the ticket admits a half-open probe.
func (t ticket) Probe() bool { return t.probe }

// breakerSet is a bounded set of circuit breakers, one per key. State is
// evaluated lazily when it is read: there are no timers and no background
// goroutines. Lookups are sharded, so requests to different keys do not
// contend on one lock. Safe for concurrent use.
type breakerSet struct {
	cfg       BreakerConfig
	seed      maphash.Seed
	shards    []breakerShard
	shardCap  int
	untracked atomic.Uint64 // admissions served untracked; see MaxBreakers
}

type breakerShard struct {
	mu sync.RWMutex
	m  map[string]*breaker // guarded by mu
	// fullUntil, when set, is the earliest end of an OpenDuration among the
	// shard's breakers, found when the shard was full and all of them were
	// open. Until then none can be evicted (a breaker leaves the open state
	// only when its OpenDuration ends), so a new key is served untracked
	// without another scan. Guarded by mu.
	fullUntil time.Time
	_         [16]byte // keep shards on separate cache lines
}

// breaker is the state machine for one key.
type breaker struct {
	key      string       // immutable
	lastUsed atomic.Int64 // unix nanos of the last admission; for eviction

	mu       sync.Mutex // guards the fields below
	state    BreakerState
	failures int       // consecutive failures while closed
	openedAt time.Time // when the breaker last opened
	since    time.Time // when it entered its state (for a lazily half-open one, openedAt+OpenDuration)
	probes   int       // probes in flight, whatever state they were admitted in
	gen      uint64    // bumped on every state change; stale tickets are ignored
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
	b.shardCap = max(1, cfg.MaxBreakers/n)
	for i := range b.shards {
		b.shards[i].m = make(map[string]*breaker)
	}
	return b
}

// Config returns the effective configuration, defaults filled in.
func (b *breakerSet) Config() BreakerConfig { return b.cfg }

func (b *breakerSet) shard(key string) *breakerShard {
	if len(b.shards) == 1 {
		return &b.shards[0]
	}
	return &b.shards[maphash.String(b.seed, key)%uint64(len(b.shards))]
}

// get returns key's breaker, creating (and evicting to make room) if needed.
// It returns nil when the key's shard is full of open breakers: the key is
// then served untracked (see BreakerConfig.MaxBreakers).
func (b *breakerSet) get(key string, now time.Time) *breaker {
	s := b.shard(key)
	s.mu.RLock()
	br := s.m[key]
	full := br == nil && now.Before(s.fullUntil)
	s.mu.RUnlock()
	if br != nil {
		return br
	}
	if full {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if existing := s.m[key]; existing != nil {
		return existing
	}
	if len(s.m) >= b.shardCap && !s.evictLocked(b.shardCap, now, b.cfg.OpenDuration) {
		return nil
	}
	br = &breaker{key: key, since: now}
	br.lastUsed.Store(now.UnixNano())
	s.m[key] = br
	return br
}

// evictLocked removes up to about an eighth of the shard, least recently
// used first among idle closed breakers, then failing closed ones, then
// half-open ones; it never removes a breaker that is open at now. It reports
// whether it removed any; when it removed none (every breaker is open) it
// sets s.fullUntil. Requires s.mu held.
func (s *breakerShard) evictLocked(capacity int, now time.Time, openFor time.Duration) bool {
	type cand struct {
		key   string
		rank  int // 0 idle closed, 1 failing closed, 2 half-open (or open past openFor)
		stamp int64
	}
	cands := make([]cand, 0, len(s.m))
	var until time.Time
	for k, br := range s.m {
		br.mu.Lock()
		state, failures, ends := br.state, br.failures, br.openedAt.Add(openFor)
		br.mu.Unlock()
		rank := 2
		switch {
		case state == BreakerOpen && now.Before(ends):
			if until.IsZero() || ends.Before(until) {
				until = ends
			}
			continue // still rejecting: never evicted
		case state == BreakerClosed && failures == 0:
			rank = 0
		case state == BreakerClosed:
			rank = 1
		}
		cands = append(cands, cand{k, rank, br.lastUsed.Load()})
	}
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
		delete(s.m, cands[i].key)
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
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// State returns key's state at now; an untracked key is closed.
func (b *breakerSet) State(key string, now time.Time) BreakerState {
	s := b.shard(key)
	s.mu.RLock()
	br := s.m[key]
	s.mu.RUnlock()
	if br == nil {
		return BreakerClosed
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.state == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
		return BreakerHalfOpen // what the next admission will see
	}
	return br.state
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
		for k, br := range s.m {
			br.mu.Lock()
			st, since := br.state, br.since
			if st == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
				st, since = BreakerHalfOpen, br.openedAt.Add(b.cfg.OpenDuration)
			}
			br.mu.Unlock()
			snap = append(snap, kv{k, st, since})
		}
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
	br.lastUsed.Store(now.UnixNano())
	br.mu.Lock()
	defer br.mu.Unlock()
	tr := transition{Key: key, From: br.state, To: br.state}
	if br.state == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
		br.setLocked(BreakerHalfOpen, br.openedAt.Add(b.cfg.OpenDuration))
		tr.To = BreakerHalfOpen
	}
	switch {
	case br.state == BreakerClosed:
		return ticket{b: br, gen: br.gen}, tr, nil
	case br.state == BreakerHalfOpen && admission && br.probes < b.cfg.HalfOpenProbes:
		br.probes++
		return ticket{b: br, gen: br.gen, probe: true}, tr, nil
	}
	return ticket{}, tr, &CircuitOpenError{Key: key, State: br.state}
}

// Done reports the outcome of an admitted attempt. Results from a previous
// generation (the breaker changed state since the ticket was issued) are
// dropped. A probe's slot is released whatever the outcome.
func (b *breakerSet) done(t ticket, o outcome, now time.Time) transition {
	br := t.b
	if br == nil {
		return transition{}
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	tr := transition{Key: br.key, From: br.state, To: br.state}
	if t.probe {
		// A probe holds its slot until it completes, whatever happened to
		// the breaker meanwhile, so probes in flight never pile up.
		br.probes--
	}
	if t.gen != br.gen {
		return tr
	}
	switch br.state {
	case BreakerClosed:
		switch o {
		case outcomeSuccess:
			br.failures = 0
		case outcomeFailure:
			br.failures++
			if br.failures >= b.cfg.FailureThreshold {
				br.openedAt = now
				br.setLocked(BreakerOpen, now)
			}
		}
	case BreakerHalfOpen:
		switch o {
		case outcomeSuccess:
			br.setLocked(BreakerClosed, now)
		case outcomeFailure:
			br.openedAt = now
			br.setLocked(BreakerOpen, now)
		}
	}
	tr.To = br.state
	return tr
}

// setLocked moves to state s, entered at since, and starts a new
// generation. Requires br.mu held.
func (br *breaker) setLocked(s BreakerState, since time.Time) {
	br.state = s
	br.since = since
	br.failures = 0
	br.gen++ // probes in flight keep their slots until they complete
}
