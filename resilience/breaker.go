package resilience

import (
	"fmt"
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

// BreakerConfig configures the circuit breakers, one per key (host). Zero
// fields take their defaults (DefaultFailureThreshold, DefaultOpenDuration,
// DefaultHalfOpenProbes), so BreakerConfig{} is the defaults. How many keys
// are tracked, and which are evicted to make room, is the engine's
// (Settings.MaxKeys): an open
// breaker is never evicted before its OpenDuration ends.
//
// A breaker counts what its attempts' verdicts say: a retryable result is
// a failure, a result without error that is not retryable a success. A
// throttle (Verdict.Throttle: for HTTP a 429, or a 503 with Retry-After)
// is neither: the server is alive and asking for less, which Retry-After,
// the retry budget and the concurrency limit answer; a breaker that
// opened on a burst of throttling would refuse every call for
// OpenDuration (as Envoy's outlier detection keeps 429 out of its
// consecutive-5xx count). A throttle neither adds to the consecutive
// failures nor clears them, and a half-open breaker's probe that meets
// one frees its slot without deciding: the breaker stays half-open and
// the next call probes. A 503 without Retry-After (or with one of 0,
// which asks for no wait) stays a failure: that is how a proxy answers for
// a backend that is down.
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
}

// withDefaults validates c and fills zero fields; it panics naming the field
// when a value makes no sense.
func (c BreakerConfig) withDefaults() BreakerConfig {
	if err := c.Validate(); err != nil {
		panic(err.Error())
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
	return c
}

// Validate checks the configuration, naming the field it rejects: every
// field must be zero (its default) or positive.
func (c BreakerConfig) Validate() error {
	switch {
	case c.FailureThreshold < 0:
		return fmt.Errorf("resilience: BreakerConfig.FailureThreshold must not be negative, got %d", c.FailureThreshold)
	case c.OpenDuration < 0:
		return fmt.Errorf("resilience: BreakerConfig.OpenDuration must not be negative, got %v", c.OpenDuration)
	case c.HalfOpenProbes < 0:
		return fmt.Errorf("resilience: BreakerConfig.HalfOpenProbes must not be negative, got %d", c.HalfOpenProbes)
	}
	return nil
}

// outcome is what one admitted attempt tells its breaker.
type outcome int

// Outcomes reported to a breaker.
const (
	outcomeIgnore  outcome = iota // neither success nor failure (caller cancelled, non-retryable error, a throttle)
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

// ticket is a breaker's admission of an attempt: hand it back with done
// (the zero ticket, no breaker, accepts done as a no-op).
type ticket struct {
	b     *breaker
	gen   uint32 // the breaker's generation when it admitted
	probe bool
}

// Probe reports whether the ticket admits a half-open probe.
func (t ticket) Probe() bool { return t.probe }

// breakerSet runs the circuit breakers of an engine's hosts (see
// hostTable), one per key. State is evaluated lazily when it is read: there
// are no timers and no background goroutines. Safe for concurrent use.
//
// The common path takes no lock and writes no word that another core is
// writing: admitting through a closed breaker reads one atomic word, and a
// success there writes that word only when it has failures to forget. Locks
// are taken to change a breaker's state, to admit or settle a half-open
// probe, and to record the failure that opens a breaker.
type breakerSet struct {
	cfg       BreakerConfig
	threshold uint32 // cfg.FailureThreshold, at most maxFailures+1
	hosts     *hostTable
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
	key  string        // immutable
	word atomic.Uint64 // a breakerWord: state, failures, generation

	mu       sync.Mutex // guards the fields below
	openedAt time.Time  // when the breaker last opened
	since    time.Time  // when it entered its state (for a lazily half-open one, openedAt+OpenDuration)
	probes   int        // probes in flight, whatever state they were admitted in
}

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

// newBreakerSet returns the breakers of hosts, configured by cfg (zero
// fields take their defaults); nil hosts means a table of its own, of
// DefaultMaxKeys. It panics if a field is negative.
func newBreakerSet(cfg BreakerConfig, hosts *hostTable) *breakerSet {
	cfg = cfg.withDefaults()
	if hosts == nil {
		hosts = newHostTable(0)
	}
	hosts.openFor = cfg.OpenDuration
	return &breakerSet{cfg: cfg, threshold: uint32(min(cfg.FailureThreshold, maxFailures+1)), hosts: hosts}
}

// stateOf returns br's state at now and when it entered it: a breaker
// whose open period ended is half-open since it ended, before any admission
// moves it.
func (b *breakerSet) stateOf(br *breaker, now time.Time) (BreakerState, time.Time) {
	br.mu.Lock()
	defer br.mu.Unlock()
	st, since := br.load().state(), br.since
	if st == BreakerOpen && now.Sub(br.openedAt) >= b.cfg.OpenDuration {
		st, since = BreakerHalfOpen, br.openedAt.Add(b.cfg.OpenDuration)
	}
	return st, since
}

// allow asks h's breaker to admit an attempt: the first of a call when
// first is set, else a later one (a retry or hedge). A closed breaker
// admits; an open one rejects with ErrCircuitOpen until OpenDuration has
// passed, then turns half-open and admits up to HalfOpenProbes first
// attempts at once (a half-open breaker's probes are whole calls, not
// retries). A nil h (an untracked key) admits with nothing recorded. The
// returned transition (if Changed) must be reported by the caller after
// allow returns. The time of the admission, in, is read only when the
// breaker is not closed.
func (b *breakerSet) allow(h *host, key string, in *instant, first bool) (ticket, transition, error) {
	if h == nil {
		return ticket{}, transition{Key: key}, nil // served untracked: as if closed, nothing recorded
	}
	br := &h.br
	if w := br.load(); w.state() == BreakerClosed {
		return ticket{b: br, gen: w.gen()}, transition{Key: key}, nil
	}
	return b.allowLocked(br, in.now(), first)
}

// allowLocked is allow for a breaker that was not closed when it looked:
// open ones may turn half-open, half-open ones admit probes.
func (b *breakerSet) allowLocked(br *breaker, now time.Time, first bool) (ticket, transition, error) {
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
	case w.state() == BreakerHalfOpen && first && br.probes < b.cfg.HalfOpenProbes:
		br.probes++
		return ticket{b: br, gen: w.gen(), probe: true}, tr, nil
	}
	return ticket{}, tr, &CircuitOpenError{Key: br.key, State: w.state()}
}

// Done reports the outcome of an admitted attempt, at in (the attempt's
// end; read only when the breaker may change state). Results from a
// previous generation (the breaker changed state since the ticket was
// issued) are dropped. A probe's slot is released whatever the outcome.
func (b *breakerSet) done(t ticket, o outcome, in *instant) transition {
	br := t.b
	if br == nil {
		return transition{}
	}
	if t.probe {
		return b.doneLocked(t, o, in)
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
				return b.doneLocked(t, o, in) // this failure opens the breaker
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
func (b *breakerSet) doneLocked(t ticket, o outcome, in *instant) transition {
	var now time.Time
	if o != outcomeIgnore { // only an outcome moves a breaker
		now = in.now() // before mu: its holders do not wait on a clock
	}
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
