package resilience

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// budgetWindow is how long a request's deposit stays in a budget.
const budgetWindow = 10 * time.Second

const (
	budgetBuckets = 10 // one-second buckets across budgetWindow
	countBits     = 32 // low bits of a bucket word hold a count (4 billion a second is out of reach)
	countMask     = 1<<countBits - 1
	// epochMod is how many seconds a bucket's epoch counts before it wraps:
	// the largest multiple of budgetBuckets that fits in the 64-countBits
	// high bits of a word (2^32-6 s, about 136 years). Because it is a
	// multiple of budgetBuckets, the seconds on either side of a wrap still
	// fall in consecutive buckets, so no two seconds of one window ever share
	// a bucket.
	epochMod = (1 << (64 - countBits)) / budgetBuckets * budgetBuckets

	// successStripes is how many counters each second's successes are
	// spread over, so that concurrent deposits seldom write the same word.
	stripeBits     = 3
	successStripes = 1 << stripeBits
)

// retryBudget caps the retries (and hedges) a client may add on top of its
// own traffic, so that a fleet's retries cannot amplify an outage however
// many replicas it has, while retries that work, against failures a retry
// fixes, cost it nothing.
//
// It learns whether retries work from their results, as the AWS SDKs'
// retry quota does. A retry or hedge pays one token as it launches and
// gets it back if it succeeds (its answer was no retryable failure and no
// overload): a retry that turned a failure into a success added no load
// that bought nothing. A retry that fails keeps its token spent. So what a
// budget bounds is the wasted work, the retries that fail, and it bounds
// them by what succeeds. It pays from two sources:
//
//   - The reserve: a handful of retries (reserve, default 2: one request's
//     retries at the default of 3 attempts), paid first. It starts full, is
//     refilled by successes, at most one a second, up to reserve, and gets
//     back the token of a retry it paid for that succeeded. A quiet client
//     lives on it alone.
//   - The deposits: every call that ends with a success deposits ratio
//     tokens (default 0.25), which expire after budgetWindow, in whole
//     seconds (the current second and the nine before it). A call that
//     fails deposits nothing, so in an outage nothing is earned.
//
// The deposits pay only a client that earns at least its reserve a second
// (reserve/ratio = 8 successful calls a second by default; in the first
// second after its first success, at that rate over the time since), only while
// retries work (over the last second, retries and hedges that failed number
// at most twice those that succeeded, plus the reserve), and only what the
// last second earned as well as the window: the deposits saved in a calm
// window never pay out at once. An attempt that times out costs a whole
// token more, from the deposits and the reserve alike, and its retry is
// paid by the reserve alone: a server too slow to answer is likely still
// working on the request, and a retry adds to its queue (the AWS SDKs
// likewise charge a timeout double). At the onset of a capacity drop,
// where attempts start timing out, the deposits that the last second's
// successes earned would otherwise pay a burst of retries into the queue
// before the timeouts' cost caught up (the bench's crowd scenario, 20
// clients without the concurrency limit through a capacity drop, `cd bench
// && go run ./cmd/peers -only crowd -rounds 1`: 1.14× the offered load at
// its peak and 2.8 s to recover, against 1.02× and 2.3 s, as without
// retries, with the reserve alone).
//
// What a client gets, at the default 3 attempts, when each attempt fails
// independently with probability p (retries fix it), from the simulation
// in budget_ladder_test.go (60 s, five seeds): a busy client (100 calls a
// second) retries every failure up to p = 20% and, at 30%, all but those of
// a few requests in a thousand (0 to 0.35% of requests over the seeds), so
// 1 − p³ succeed (99.9% at 10%, 99.2% at 20%, 97.3% at 30%, less those
// few): its failed retries, p² + p³ a request, stay below the 0.25 × (1 −
// p³) it earns while p < 40%. A quiet client (1 call a second) retries
// every failure but when a request follows one whose attempts all failed
// and fails too, with its reserve spent:
// about p⁴ of requests (0.02% at 10%, 0.2% at 20%, 1.3% at 30%, so 96.3%
// succeed there). When retries fail with the first attempt (an outage, a
// host shedding everything), nothing succeeds, nothing is earned or
// refunded, the deposits stop within a second, and a client spends its
// reserve once and stops: about 1.0 attempts a request for a busy client
// (1.01 over an 8 s outage), 1 + 2/n for a quiet one with n requests in
// the outage, however long it lasts.
//
// Exactly, with seconds being whole seconds of the times passed in and the
// last second estimated from the current one-second bucket and a share of
// the previous one (the part of it within a second of now), as a
// sliding-window counter does: a retry is paid from the reserve if it
// holds one; failing that, unless it follows a timeout, from the deposits
// if the last second earned at
// least reserve tokens, its failed retries number at most twice its
// successful ones plus reserve, and, counting it, at most ⌊ratio ×
// successes − timeouts⌋ tokens paid from deposits are spent (launched and
// not refunded) in the window and in the last second, each counted over
// its own span; failing both, it does not launch.
//
// The bound, for a fleet of N clients (replicas, or transports) sharing a
// downstream, over any interval I of any length: the retries and hedges
// launched in I that do not succeed number at most
//
//	ratio × S + N × reserve + P
//
// where S counts the fleet's successful calls from nine seconds before I's
// first second through its last second, and P the refills: at most one per
// client per second of I, and no more than the successes in I. (Deposits:
// the windows that end at each client's last deposit-paid launches, taken
// backwards and disjoint, each hold at most ratio × their successes of
// tokens spent and not refunded; reserve: each client enters I with at
// most reserve and gains one per refill or refund, and a refund is a retry
// that succeeded.) The retries that do succeed are bounded not by the
// budget but by the failures they fix: each follows a failed attempt of a
// request, and a request never makes more attempts than its policy's
// MaxAttempts. In an outage, where nothing succeeds, P is 0, and S holds
// only what succeeded before it, of which the last second's share can be
// paid: the fleet adds at most N × reserve retries and a second's deposits
// of its busy clients, however long the outage lasts. The bound is
// property-tested for any sequence of calls and retries
// (TestBudgetBoundOverAnyInterval, TestBudgetFleetBound), for any fleet
// whose attempts fail independently (TestBudgetFleetBoundUnderIndependentFailures)
// and for any fleet in an outage after any healthy spell
// (TestBudgetFleetBoundInAnOutage).
//
// Beside its anchors: the AWS SDKs' retry quota (500 tokens, 5 a retry, 10
// a timeout, a retry's cost given back when it succeeds, 1 token a success
// without retry) learns as this does, but its per-client constant is 100
// retries, spent in full by every replica of a fleet in each outage, where
// this reserve is 2. gRPC's retry throttling (a bucket that loses a token
// a failure, gains a fraction a success, and retries while more than half
// full), and this budget's previous design, which took a deposit back for
// every failure, stop retrying once about a tenth of attempts fail: they
// count a failure a retry fixes as they count an outage. Finagle's
// RetryBudget and Envoy's retry budget have a floor of retries a second (or
// concurrent retries) for every replica, which a fleet multiplies. The SRE
// book's per-client ratio of 10% bounds all retries; this bounds the ones
// that fail. A server's pushback, as gRPC's grpc-retry-pushback-ms, is the
// transport's (see transport.Middleware).
//
// Time is a parameter of every method (the engine passes its clock), and the
// bookkeeping is lock-free: per-second buckets of atomic counters and one
// word for the reserve, so concurrent requests never queue on a mutex. Every
// successful call deposits, so its counter is spread further: each second's
// successes are counted in successStripes words on cache lines of their
// own, a success adds to one (see Succeed), and a retry (far rarer) sums
// them all. A success costs its deposit and one load of the reserve's word
// (written only while the reserve is not full). A budget takes about 1.7
// KiB. A nil *retryBudget allows everything. Safe for concurrent use.
type retryBudget struct {
	ratio   float64 // immutable, read by every deposit
	reserve uint64  // immutable: the reserve's capacity
	// born is when the first call succeeded (Unix nanoseconds), 0 before
	// it: written once, then only read (by every deposit), so its line
	// stays shared between cores.
	born atomic.Int64
	// stripes hands out stripe numbers (*int), round robin as it makes
	// them. A sync.Pool keeps one per P, so the requests a core runs keep
	// depositing in the same stripe and its line stays in that core's
	// cache; a random stripe per deposit moved the line between cores on
	// most deposits.
	stripes    sync.Pool
	nextStripe atomic.Uint32
	_          [64]byte

	// held packs the reserve: the retries it holds (low countBits bits)
	// and the epoch of the second it was last refilled in (high bits), so
	// that a refill, a spend and a refund are each one compare-and-swap.
	held atomic.Uint64
	_    [64]byte

	// Each word packs a bucket's epoch (see epochOf, high bits) with a count
	// (low countBits bits). A word whose epoch is stale
	// reads as zero and is reset by the next writer. The padding around
	// these keeps the writes of retries off the lines deposits use.
	spent     [budgetBuckets]atomic.Uint64  // retries paid from deposits per second, less those refunded
	timeouts  [budgetBuckets]atomic.Uint64  // attempts failed by timing out per second
	won       [budgetBuckets]atomic.Uint64  // retries and hedges that succeeded per second
	lost      [budgetBuckets]atomic.Uint64  // retries and hedges that failed per second
	_         [64]byte                      //
	successes [successStripes]successStripe // successful calls per second, the sum of the stripes
}

// successStripe is one share of the per-second success counts: its buckets
// are words like the other buckets'. The padding keeps two stripes' words
// off one cache line whatever the alignment.
type successStripe struct {
	buckets [budgetBuckets]atomic.Uint64
	_       [64]byte
}

// maxReserve bounds the reserve: more than this many retries held per
// client is a floor by another name, and it keeps the count well inside
// its countBits.
const maxReserve = 1000

// newRetryBudget returns a budget. ratio must be a finite number ≥ 0 and
// reserve between 0 and maxReserve; it panics otherwise, naming the
// argument. newRetryBudget(0, 0) returns nil: no budget, every retry
// allowed.
func newRetryBudget(ratio float64, reserve int) *retryBudget {
	if err := validateBudget(ratio, reserve); err != nil {
		panic(err.Error())
	}
	if ratio == 0 && reserve == 0 {
		return nil
	}
	b := &retryBudget{ratio: ratio, reserve: uint64(reserve)}
	b.held.Store(uint64(reserve)) // full; its epoch (0) matters only to the first refill
	b.stripes.New = func() any {
		i := int(b.nextStripe.Add(1) % successStripes)
		return &i
	}
	return b
}

// validateBudget checks a budget's ratio and reserve.
func validateBudget(ratio float64, reserve int) error {
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio < 0 {
		return fmt.Errorf("resilience: budget ratio must be a finite number >= 0, got %v", ratio)
	}
	if reserve < 0 || reserve > maxReserve {
		return fmt.Errorf("resilience: budget reserve must be between 0 and %d, got %d", maxReserve, reserve)
	}
	return nil
}

// epochOf numbers now's bucket: whole seconds since the Unix epoch, modulo
// epochMod so it fits the high bits of a bucket word. Its bucket is
// epochOf(now) % budgetBuckets. A word is only misread if its bucket went
// unwritten for a whole multiple of epochMod (136 years).
func epochOf(now time.Time) uint64 {
	s := now.Unix() % epochMod // Unix rounds down, before 1970 too
	if s < 0 {
		s += epochMod
	}
	return uint64(s)
}

// add increments the bucket for epoch by delta (which may be -1 to undo).
func add(w *atomic.Uint64, epoch uint64, delta int64) {
	for !addOnce(w, epoch, delta) {
	}
}

// addOnce is one attempt of add: it reports false, changing nothing, when
// another writer changed the word between its load and its store.
func addOnce(w *atomic.Uint64, epoch uint64, delta int64) bool {
	old := w.Load()
	var n uint64
	switch {
	case old>>countBits == epoch:
		n = uint64(int64(old&countMask) + delta)
	case delta > 0:
		n = uint64(delta)
	default:
		return true // the bucket rolled over; nothing left to undo
	}
	return w.CompareAndSwap(old, epoch<<countBits|n&countMask)
}

// read returns the bucket's count if it belongs to epoch.
func read(w *atomic.Uint64, epoch uint64) int64 {
	v := w.Load()
	if v>>countBits != epoch {
		return 0
	}
	return int64(v & countMask)
}

// sum adds up the buckets of the n seconds (at most budgetBuckets) up to
// and including epoch's.
func sum(ws *[budgetBuckets]atomic.Uint64, epoch uint64, n int) int64 {
	var total int64
	for i := range uint64(n) {
		e := (epoch + epochMod - i) % epochMod
		total += read(&ws[e%budgetBuckets], e)
	}
	return total
}

// successesIn returns the successes deposited in the n seconds up to and
// including epoch's: the sum over every stripe.
func (b *retryBudget) successesIn(epoch uint64, n int) int64 {
	var total int64
	for i := range uint64(n) {
		e := (epoch + epochMod - i) % epochMod
		for s := range b.successes {
			total += read(&b.successes[s].buckets[e%budgetBuckets], e)
		}
	}
	return total
}

// earned returns what the n seconds up to and including epoch's have
// earned for retries, spent or not: ratio tokens a success, less a token a
// timeout. It may be negative.
func (b *retryBudget) earned(epoch uint64, n int) float64 {
	return b.ratio*float64(b.successesIn(epoch, n)) - float64(sum(&b.timeouts, epoch, n))
}

// past returns the share of the second before now's that lies in the
// second up to now: the weight a sliding one-second window gives the
// previous bucket, as a sliding-window counter estimates it from two fixed
// ones.
func past(now time.Time) float64 {
	return 1 - float64(now.Nanosecond())/float64(time.Second)
}

// recentEarned is what the second up to now has earned (see earned),
// estimated from now's bucket, e, and the one before it.
func (b *retryBudget) recentEarned(now time.Time, e uint64) float64 {
	prev := (e + epochMod - 1) % epochMod
	return b.earned(e, 1) + past(now)*b.earned(prev, 1)
}

// recent is what ws counted in the second up to now, estimated as
// recentEarned is.
func (b *retryBudget) recent(ws *[budgetBuckets]atomic.Uint64, now time.Time, e uint64) float64 {
	prev := (e + epochMod - 1) % epochMod
	return float64(sum(ws, e, 1)) + past(now)*float64(sum(ws, prev, 1))
}

// quietBelow is what the second up to now must have earned for the
// deposits to pay: the reserve. For a budget whose first success came less
// than a second ago it is the reserve's share of the time since, so that a
// busy client's first milliseconds are judged at the rate it runs at, not
// over a second it did not exist in (a client at 100 calls a second whose
// first calls fail twice would otherwise be refused until its eighth
// success). The deposits a client so new can pay are still at most ratio ×
// its successes, so the fleet bound is unchanged.
func (b *retryBudget) quietBelow(now time.Time) float64 {
	born := b.born.Load()
	if age := now.UnixNano() - born; born != 0 && age < int64(time.Second) {
		return float64(b.reserve) * float64(max(age, 0)) / float64(time.Second)
	}
	return float64(b.reserve)
}

// budgetToken is one token taken from a budget, which Refund gives back. The
// zero value refunds nothing.
type budgetToken struct {
	w       *atomic.Uint64 // the bucket word it was paid from, or the reserve's
	epoch   uint64         // that bucket's epoch when it was paid
	reserve uint64         // the reserve's capacity when paid from it; 0 when paid from deposits
}

// Refund gives the token back: for a retry that was paid for but did not
// launch (its sleep was interrupted, or the breaker refused it), and for a
// retry or hedge that succeeded (see retryBudget). A token whose second has
// left the window is already forgotten: nothing to give back; a reserve
// that has since been refilled to full stays full. Refund a token at most
// once.
func (t budgetToken) Refund() {
	switch {
	case t.w == nil:
	case t.reserve > 0:
		for {
			old := t.w.Load()
			if old&countMask >= t.reserve || t.w.CompareAndSwap(old, old+1) {
				return
			}
		}
	default:
		add(t.w, t.epoch, -1)
	}
}

// take spends one token for a retry or hedge about to launch at now and
// returns it, so that a retry that does not launch after all, or succeeds,
// can Refund it; it reports whether it was allowed. It first uses the
// reserve, then the deposits; a retry after a timeout (afterTimeout) is
// paid by the reserve alone.
func (b *retryBudget) take(now time.Time, afterTimeout bool) (budgetToken, bool) {
	if b == nil {
		return budgetToken{}, true
	}
	for {
		old := b.held.Load()
		if old&countMask == 0 {
			break
		}
		if b.held.CompareAndSwap(old, old-1) {
			return budgetToken{w: &b.held, reserve: b.reserve}, true
		}
	}
	if b.ratio == 0 || afterTimeout {
		return budgetToken{}, false
	}
	e := epochOf(now)
	lost, won := b.recent(&b.lost, now, e), b.recent(&b.won, now, e)
	if lost > 2*won+float64(b.reserve) {
		return budgetToken{}, false // retries are not working: the deposits pay nothing
	}
	earned := b.recentEarned(now, e)
	if earned < b.quietBelow(now) {
		return budgetToken{}, false // a quiet client: its reserve pays alone
	}
	w := &b.spent[e%budgetBuckets]
	add(w, e, 1)
	if b.recent(&b.spent, now, e) <= earned &&
		float64(sum(&b.spent, e, budgetBuckets)) <= math.Floor(b.earned(e, budgetBuckets)) {
		return budgetToken{w: w, epoch: e}, true
	}
	add(w, e, -1)
	return budgetToken{}, false
}

// Succeed records a call that ended at now with an answer that was no
// retryable failure and no overload, returned by an attempt that paid tok
// (the zero token for a first attempt). It deposits ratio tokens, in one
// of the second's stripes (the one of the processor, P, that runs it, as
// b.stripes hands them out; when two deposits meet on a stripe anyway, the
// one whose compare-and-swap fails moves to the next stripe rather than
// retry the word it lost); it puts one retry back in the reserve, unless
// the reserve is full or was already refilled in now's second; and it
// refunds tok, counting a retry that worked. The engine calls it once for
// every call that ends with a success; its common case, a first attempt
// and a full reserve, costs the deposit and one atomic load.
func (b *retryBudget) Succeed(now time.Time, tok budgetToken) {
	if b == nil {
		return
	}
	e := epochOf(now)
	if b.born.Load() == 0 {
		b.born.CompareAndSwap(0, max(now.UnixNano(), 1))
	}
	if tok.w != nil {
		tok.Refund()
		add(&b.won[e%budgetBuckets], e, 1)
	}
	if b.ratio > 0 {
		p := b.stripes.Get().(*int)
		i := *p
		for !addOnce(&b.successes[i].buckets[e%budgetBuckets], e, 1) {
			i = (i + 1) % successStripes
		}
		b.stripes.Put(p)
	}
	if b.reserve == 0 {
		return
	}
	old := b.held.Load()
	for old>>countBits != e && old&countMask < b.reserve {
		if b.held.CompareAndSwap(old, e<<countBits|(old&countMask+1)) {
			return
		}
		old = b.held.Load()
	}
}

// Fail records an attempt that failed at now with a retryable result,
// having paid tok (the zero token for a first attempt), and whether it
// timed out. A retry or hedge that failed counts against retries working
// (see retryBudget); a timeout costs a token from the deposits and one
// retry from the reserve, if it holds one. Other failures cost nothing by
// themselves: they earn nothing, and a retry of theirs that fails keeps
// its token. The engine calls it for every such attempt, the ones it does
// not retry included.
func (b *retryBudget) Fail(now time.Time, tok budgetToken, timeout bool) {
	if b == nil {
		return
	}
	e := epochOf(now)
	if tok.w != nil {
		add(&b.lost[e%budgetBuckets], e, 1)
	}
	if !timeout {
		return
	}
	if b.reserve > 0 {
		for {
			old := b.held.Load()
			if old&countMask == 0 || b.held.CompareAndSwap(old, old-1) {
				break
			}
		}
	}
	if b.ratio > 0 {
		add(&b.timeouts[e%budgetBuckets], e, 1)
	}
}

// Tokens returns how many retries the budget holds at now: what the window
// has earned and not spent (see earned) plus what the reserve holds. Of the
// window's share, no more than the last second has earned and not spent
// can be spent now.
func (b *retryBudget) Tokens(now time.Time) float64 {
	if b == nil {
		return math.Inf(1)
	}
	e := epochOf(now)
	dep := b.earned(e, budgetBuckets) - float64(sum(&b.spent, e, budgetBuckets))
	return max(dep, 0) + float64(b.held.Load()&countMask)
}
