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
	// recentSeconds is how many seconds, the current one included, must
	// have earned a retry paid from deposits, besides the whole window: a
	// second pays out no more than these have earned.
	recentSeconds = 1
	countBits     = 32 // low bits of a bucket word hold a count (4 billion a second is out of reach)
	countMask     = 1<<countBits - 1
	// epochMod is how many seconds a bucket's epoch counts before it wraps:
	// the largest multiple of budgetBuckets that fits in the 64-countBits
	// high bits of a word (2^32-6 s, about 136 years). Because it is a
	// multiple of budgetBuckets, the seconds on either side of a wrap still
	// fall in consecutive buckets, so no two seconds of one window ever share
	// a bucket.
	epochMod = (1 << (64 - countBits)) / budgetBuckets * budgetBuckets

	// requestStripes is how many counters each second's requests are
	// spread over, so that concurrent deposits seldom write the same word.
	stripeBits     = 3
	requestStripes = 1 << stripeBits
)

// retryBudget caps how many retries (and hedges) a client may add on top of its
// own traffic, so that a fleet's retries cannot amplify an outage however
// many replicas it has.
//
// It pays from two sources. The deposits: every original request deposits
// ratio tokens, which expire after budgetWindow, in whole seconds (the
// current second and the nine before it); each retry or hedge that launches
// spends one. And the reserve: a handful of retries (reserve, default 2:
// one request's retries at the default of 3 attempts) that a client holds
// while its downstream is healthy, so that a quiet client, whose deposits
// earn less than a retry, still absorbs an isolated transient failure. A
// retry is paid from the deposits if they can, else from the reserve.
//
// The reserve is refilled by successes only: an attempt the server answered
// without a retryable failure (Succeed) puts one retry back, at most one a
// second, up to reserve. It starts full. During an outage nothing succeeds,
// so a client spends its reserve once and then has none, however long the
// outage lasts: the reserve is a per-client constant that does not grow with
// an outage's length, unlike a floor of retries a second, which every
// replica of a fleet spends every second (ten quiet replicas with a floor
// of 10 a second may add 100 retries a second to a downstream that is
// down). The one-a-second pace keeps a busy client's retries and hedges on
// its ratio: the reserve may add one a second, not one per success. An
// attempt that times out costs the reserve one retry as well, the price of
// the retry it asks for, as it costs the deposits a whole token (below): a
// host too slow to answer is likely still working on it, so the reserve
// absorbs one timed-out attempt where it absorbs two failed ones (at a slow
// host whose service time doubles, the default reserve adds one retry, not
// two, to the second in which its queue starts to grow).
//
// Failures cost deposits, so that the deposits stop paying when failures
// dominate: an attempt that fails with a retryable error takes back one
// request's deposit (ratio tokens), and one that timed out costs a whole
// token, the price of the retry it asks for: a server too slow to answer is
// likely still working on the request, and a retry adds to its queue (the
// shape of the AWS SDKs' retry quota; gRPC's retry throttling likewise
// charges failures and pays for successes). Once the window's failures cost
// more than its deposits, the deposits pay nothing. At the steady state that
// is when more than ratio/(1+ratio) of attempts fail with errors (9% at the
// default 0.1), or more than ratio/2 time out (5%). And the deposits saved
// in a calm window never pay out at once: a retry is paid from deposits
// only if its own second has earned it too, by the same count, so a second
// whose failures outnumber its requests (every second of an outage) pays
// nothing from deposits.
//
// Exactly, with seconds being whole seconds of the times passed in: a retry
// is paid from deposits if, counting it, at most ⌊ratio × (requests −
// errors) − timeouts⌋ were paid from deposits in its window (requests,
// errors and timeouts counted in the same window) and at most ⌈ratio ×
// (requests − errors) − timeouts⌉ (rounded up, so that a client with little
// traffic gets one) in its own second, counted in that second; failing that,
// from the reserve if it holds one; failing both, it does not launch.
//
// The bound, for a fleet of N clients (replicas, or transports) sharing a
// downstream, over any interval I of any length: the retries and hedges
// launched in I number at most
//
//	ratio × R + N × reserve + P
//
// where R counts the fleet's requests from nine seconds before I's first
// second through its last second, and P the refills: at most one per client
// per second of I, and no more than the successes in I. (Deposits: the
// windows that end at each client's last deposit-paid launches, taken
// backwards and disjoint, each pay at most ratio × their requests; reserve:
// each client enters I with at most reserve and gains one per refill.) In an
// outage, where nothing succeeds, P is 0: the fleet adds at most ratio × R +
// N × reserve retries however long the outage lasts, and since every second
// of it counts at least as many failures as requests, the deposits stop
// paying within a second of its start, which leaves N × reserve. A request
// never makes more attempts than its policy's MaxAttempts either.
//
// Beside its anchors: Finagle's RetryBudget has the floor this budget
// dropped (a minimum of retries a second, for every replica); Envoy's retry
// budget bounds concurrent retries with a floor of 3, so a quiet client
// retries every failure; the AWS SDKs' retry quota (500 tokens, 5 a retry,
// 10 a timeout, given back by successes) and gRPC's retry throttling (a
// bucket that starts full, loses a token a failure, gains a fraction a
// success, and retries while more than half full) have no floor, but a
// per-client constant (100 retries for AWS, half the bucket for gRPC) that
// successes refill at no pace, where this reserve is 2, one a second.
// A server's pushback, as gRPC's grpc-retry-pushback-ms, is the transport's
// (see transport.Middleware).
//
// Time is a parameter of every method (the engine passes its clock), and the
// bookkeeping is lock-free: per-second buckets of atomic counters and one
// word for the reserve, so concurrent requests never queue on a mutex. Every
// request deposits, so its counter is spread further: each second's
// requests are counted in requestStripes words on cache lines of their own,
// a deposit adds to one (see Deposit), and a retry or a failure (far rarer)
// sums them all. A success costs its deposit and one load of the reserve's
// word (written only while the reserve is not full). A budget takes about
// 1.5 KiB. A nil *retryBudget allows everything. Safe for concurrent use.
type retryBudget struct {
	ratio   float64 // immutable, read by every deposit
	reserve uint64  // immutable: the reserve's capacity
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
	spent    [budgetBuckets]atomic.Uint64  // retries paid from deposits per second
	errors   [budgetBuckets]atomic.Uint64  // attempts failed with a retryable error per second
	timeouts [budgetBuckets]atomic.Uint64  // attempts failed by timing out per second
	_        [64]byte                      //
	requests [requestStripes]requestStripe // original requests per second, the sum of the stripes
}

// requestStripe is one share of the per-second request counts: its buckets
// are words like the other buckets'. The padding keeps two stripes' words
// off one cache line whatever the alignment.
type requestStripe struct {
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
		i := int(b.nextStripe.Add(1) % requestStripes)
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

// requestsIn returns the requests deposited in the n seconds up to and
// including epoch's: the sum over every stripe.
func (b *retryBudget) requestsIn(epoch uint64, n int) int64 {
	var total int64
	for i := range uint64(n) {
		e := (epoch + epochMod - i) % epochMod
		for s := range b.requests {
			total += read(&b.requests[s].buckets[e%budgetBuckets], e)
		}
	}
	return total
}

// earned returns what the n seconds up to and including epoch's have
// earned for retries, spent or not: ratio tokens a request, less what their
// failures cost (ratio an error, one a timeout). It may be negative.
func (b *retryBudget) earned(epoch uint64, n int) float64 {
	return b.ratio*float64(b.requestsIn(epoch, n)-sum(&b.errors, epoch, n)) - float64(sum(&b.timeouts, epoch, n))
}

// Deposit records one original request at now, in one of the second's
// stripes: the one of the processor (P) that runs it, as b.stripes hands
// them out. When two deposits meet on a stripe anyway, the one whose
// compare-and-swap fails moves to the next stripe rather than retry the word
// it lost. Every stripe counts the same.
func (b *retryBudget) Deposit(now time.Time) {
	if b == nil || b.ratio == 0 {
		return
	}
	e := epochOf(now)
	p := b.stripes.Get().(*int)
	i := *p
	for !addOnce(&b.requests[i].buckets[e%budgetBuckets], e, 1) {
		i = (i + 1) % requestStripes
	}
	b.stripes.Put(p)
}

// Withdraw spends one token for a retry or hedge about to launch at now and
// reports whether it was allowed. It first uses the deposits, then the
// reserve.
func (b *retryBudget) Withdraw(now time.Time) bool {
	_, ok := b.take(now)
	return ok
}

// budgetToken is one token taken from a budget, which Refund gives back. The
// zero value refunds nothing.
type budgetToken struct {
	w       *atomic.Uint64 // the bucket word it was paid from, or the reserve's
	epoch   uint64         // that bucket's epoch when it was paid
	reserve uint64         // the reserve's capacity when paid from it; 0 when paid from deposits
}

// Refund gives the token back, for a retry that was paid for but did not
// launch (its sleep was interrupted, or the breaker refused it). A token
// whose second has left the window is already forgotten: nothing to give
// back; a reserve that has since been refilled to full stays full. Refund a
// token at most once.
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

// Take is Withdraw returning the token it spent, so that a retry that does
// not launch after all can Refund it.
func (b *retryBudget) take(now time.Time) (budgetToken, bool) {
	if b == nil {
		return budgetToken{}, true
	}
	e := epochOf(now)
	if b.ratio > 0 {
		w := &b.spent[e%budgetBuckets]
		add(w, e, 1)
		if float64(sum(&b.spent, e, recentSeconds)) <= math.Ceil(b.earned(e, recentSeconds)) &&
			float64(sum(&b.spent, e, budgetBuckets)) <= math.Floor(b.earned(e, budgetBuckets)) {
			return budgetToken{w: w, epoch: e}, true
		}
		add(w, e, -1)
	}
	for {
		old := b.held.Load()
		if old&countMask == 0 {
			return budgetToken{}, false
		}
		if b.held.CompareAndSwap(old, old-1) {
			return budgetToken{w: &b.held, reserve: b.reserve}, true
		}
	}
}

// charge takes one retry from the reserve, if it holds one, for a timed-out
// attempt (see retryBudget).
func (b *retryBudget) charge() {
	for {
		old := b.held.Load()
		if old&countMask == 0 || b.held.CompareAndSwap(old, old-1) {
			return
		}
	}
}

// Succeed records an attempt that the server answered at now without a
// retryable failure: it puts one retry back in the reserve, unless the
// reserve is full or was already refilled in now's second. The engine
// calls it for every call that ends with a success, so its common case, a
// full reserve, is one atomic load.
func (b *retryBudget) Succeed(now time.Time) {
	if b == nil || b.reserve == 0 {
		return
	}
	old := b.held.Load()
	if old&countMask >= b.reserve {
		return
	}
	e := epochOf(now)
	for old>>countBits != e && old&countMask < b.reserve {
		if b.held.CompareAndSwap(old, e<<countBits|(old&countMask+1)) {
			return
		}
		old = b.held.Load()
	}
}

// Fail records an attempt that failed at now with a retryable error, or by
// timing out (timeout set): its cost comes off the deposits, and a
// timeout's off the reserve too (see retryBudget). The engine calls it for every such attempt, the ones it
// does not retry included.
func (b *retryBudget) Fail(now time.Time, timeout bool) {
	if b == nil {
		return
	}
	if timeout && b.reserve > 0 {
		b.charge()
	}
	if b.ratio == 0 {
		return
	}
	e := epochOf(now)
	if timeout {
		add(&b.timeouts[e%budgetBuckets], e, 1)
		return
	}
	add(&b.errors[e%budgetBuckets], e, 1)
}

// Tokens returns how many retries the budget holds at now: what the window
// has earned and not spent (see earned) plus what the reserve holds. Of the
// window's share, no more than its last recentSeconds have earned and not
// spent can be spent now.
func (b *retryBudget) Tokens(now time.Time) float64 {
	if b == nil {
		return math.Inf(1)
	}
	e := epochOf(now)
	dep := b.earned(e, budgetBuckets) - float64(sum(&b.spent, e, budgetBuckets))
	return max(dep, 0) + float64(b.held.Load()&countMask)
}
