package resilience

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// attempt is one attempt in flight or done.
type attempt[T any] struct {
	info  AttemptInfo
	ctx   context.Context // the attempt's context, as OnAttemptStart returned it
	own   ownCtx          // the attempt's own context; zero when it shares the call's
	timer *timeoutTimer   // the per-attempt timeout, if any
	// ht is the hedge timer armed for this attempt while it runs inline
	// (see runInline); the caller's goroutine alone reads or writes it.
	// When the per-attempt timeout is longer than the hedge delay (see
	// lateTimeout), it is not armed with it: the hedge timer's callback
	// arms it, for the rest of the timeout, if the attempt is still
	// running when the hedge delay has passed; most attempts answer within
	// the delay, and then one timer served both.
	ht    *hedgeTimer[T]
	adm   admission // what the attempt holds: see giveBackAfter (adm.tok is what a retry or hedge paid the budget, refunded if it succeeds)
	start time.Time // read at launch, when the attempt is timed (see timed)
	end   instant   // the attempt's end, as Do returned: what decides on its result reads it
	dur   time.Duration
	v     T
	err   error
	verd  Verdict
	kept  bool // Retain has run on v
	// timedOut: the per-attempt timeout fired, and its callback (which
	// calls cancel) may still be running: the attempt must not be reused.
	timedOut bool

	panicked *attemptPanic // set when the attempt panicked on its own goroutine
}

// attemptPanic carries a panic from an attempt's goroutine to the caller's.
type attemptPanic struct{ value any }

// run is the state of one Execute. Its sequential half (callState)
// belongs to the goroutine driving the call: the caller's, unless a hedge
// timer handed the call over. A call without hedging runs every attempt
// and the loop there, and nothing else ever sees r. A hedging call whose
// Op is prompt runs each attempt there too ("inline", see hedge.go), with
// a hedge timer armed meanwhile; the caller and that timer's callback meet
// under the timer's own lock (see hedgeTimer). When a hedge fires, or from
// the start for a hedging call whose Op is not prompt, the call goes
// concurrent: it gets its concurrent half (sh, see shared), every further
// attempt runs on a goroutine of its own, and they report to one driver.
//
// A run is pooled when its call returns only if no other goroutine may
// still touch it (see poolable), so a pooled run never went concurrent:
// sh is nil and its storage still zero, and putRun clears only its
// callState. (Clearing the whole run, a kilobyte of pointer slots under the
// garbage collector's write barrier, cost ≈ 45 ns of CPU time per armed
// request, about 20% of a bare in-memory request: issue #22's A/B.)
// TestFinishedCallsKeepNothingAlive checks that a pooled run keeps no
// value of its call alive.
type run[T any] struct {
	callState[T]

	spareHT *hedgeTimer[T] // a stopped hedge timer, for the next inline attempt (kept when pooled)

	// sh is the call's concurrent half, set once, when the call goes
	// concurrent (goConcurrent): nil for a call that never did. Its
	// storage is the run's own (shStore), so going concurrent allocates
	// nothing for it; a run that went concurrent is never pooled, so that
	// storage is always fresh.
	sh      *shared[T]
	shStore shared[T]
}

// shared is the concurrent half of a call: what it needs once its attempts
// run on goroutines of their own and report to a driver (the caller, or a
// hedge timer's goroutine that took the call over). mu guards decided,
// active and done, which the driver and the attempts share; the rest
// belongs to the driver, but for finished, final and finalPanic, which the
// caller reads once finished is closed. Both lists hold only attempts in
// flight or finished and not yet taken, so the memory of a call is
// bounded by its attempts in flight, never by MaxAttempts.
type shared[T any] struct {
	mu         sync.Mutex
	decided    bool           // the call has returned; late attempts release themselves
	active     []*attempt[T]  // attempts launched and not yet taken by the loop, for cancellation
	done       []*attempt[T]  // finished attempts waiting for the loop, oldest first
	activeBuf  [4]*attempt[T] // backs active for the common small case
	doneBuf    [2]*attempt[T] // backs done for the common small case
	wake       chan struct{}  // signalled (capacity 1) when done grows
	timer      clock.Timer    // the driver's hedge timer
	finished   chan struct{}  // closed when a driver that took the call over has its result; nil while the caller drives
	final      Result[T]      // that driver's result, once finished is closed
	finalPanic *attemptPanic  // or the panic that ended it
}

// callState is the part of a run that any call may set: what putRun clears.
type callState[T any] struct {
	e      *Engine
	c      Call[T]
	parent context.Context // the caller's context
	ctx    context.Context // the call's context (after OnCallStart)
	start  time.Time

	maxAttempts int
	limitReason EndReason // reason reported when maxAttempts was cut by Prepare
	probe       bool
	host        *host         // the key's state, when the engine keeps any and the key is tracked
	held        admission     // what the driving goroutine took for the next attempt, not yet launched (see admission)
	hedging     bool          // hedging is on (see hedge.go for its two phases)
	hk          *hedgeKey     // the key's adaptive state, when the call hedges adaptively
	hedgeDelay  time.Duration // the delay before each hedge: the policy's, or the learned one

	launched, retries, hedges, inflight int
	backoffRetries                      int // retries that used the backoff
	prevDelay, slept                    time.Duration
	retained                            *attempt[T] // most recent retryable result with a value
	errs                                errorLog

	ready *attempt[T] // the finished attempt, while the call is sequential

	lingering bool // a hedge timer fired (or the inline attempt panicked): its callback may still touch r

	first attempt[T] // the first attempt, allocated with the run
}

// poolable reports, as the call returns to its caller, whether no other
// goroutine may still touch r: not after a handover (late attempts), nor
// after a hedge timer fired (its callback), nor after the first attempt's
// timeout fired (its callback reads r.first.own). Later attempts are
// allocated on their own and never reused, so their timeouts do not count.
func (r *run[T]) poolable() bool { return r.sh == nil && !r.lingering && !r.first.timedOut }

// Execute runs c on e and returns its result. It never panics on a
// well-formed call; a panicking hook or Do propagates.
func Execute[T any](ctx context.Context, e *Engine, c Call[T]) Result[T] {
	e.fill(&c.Policy)
	if e.plain && c.Policy.PerAttemptTimeout <= 0 && !c.Policy.hedging(e) {
		return executePlain(ctx, e, &c)
	}
	return executeRun(ctx, e, c)
}

// recycle tells op, if it is a recycler, that nothing but the caller can
// use it any more.
func recycle[T any](op Operation[T]) {
	if rc, ok := op.(recycler); ok {
		rc.Recycle()
	}
}

// executeRun runs c on a run state: the general path, which executePlain
// repeats for its first attempt (TestPlainAgreesWithGeneral holds the two
// to the same outcomes).
func executeRun[T any](ctx context.Context, e *Engine, c Call[T]) Result[T] {
	r := getRun[T](e)
	r.e, r.c, r.parent, r.ctx = e, c, ctx, ctx
	entry := e.instant() // the call's admission: nothing slow comes before it but OnCallStart
	if e.timed {
		r.start = entry.now()
	}
	res := r.execute(&entry)
	// Unless a hedge fired, every attempt ran on this goroutine and nothing
	// of r outlives the call (results, events and the winner's cancel func
	// are copies), so the state can be reused. After a handover late
	// attempts may still hold r, and after a timer fired its callback may:
	// r is then left to the garbage collector.
	if r.poolable() {
		putRun(e, r)
		recycle(c.Op)
	}
	return res
}

// executePlain runs a call on a plain engine (see Engine.plain) whose policy
// neither hedges nor times attempts out: the common case, made cheap. The
// first attempt runs with nothing but locals: no run state, no clock read
// (the budget's deposit and success each take the current second from the
// coarse clock: see instant), and a result that is not retryable
// returns at once, exactly as the general path would return it. Only a
// retryable first result takes a run state, which carries on from there as
// the general path does after a first attempt.
func executePlain[T any](ctx context.Context, e *Engine, c *Call[T]) Result[T] {
	if err := ctx.Err(); err != nil {
		recycle(c.Op)
		return Result[T]{Err: err}
	}
	limit := max(1, c.Policy.MaxAttempts)
	n, why, err := c.Op.Prepare(limit)
	if err != nil {
		recycle(c.Op)
		return Result[T]{Err: err}
	}
	limitReason := ReasonAttemptsExhausted
	if n < limit {
		limit, limitReason = max(1, n), why
	}
	info := AttemptInfo{Number: 1, Kind: KindInitial}
	v, err := c.Op.Do(ctx, info)
	verd := c.Op.Classify(v, err, info)
	if !verd.Retryable {
		recycle(c.Op) // every attempt ran here: nothing else holds c.Op
		switch {
		case err == nil:
			if !verd.Overload && e.budget != nil { // an answer that says the server is overloaded is no success
				// The end's one use of its time: the coarse second, as an
				// instant would read it, without making one (an instant's
				// second is a call more, a few percent of this path).
				e.budget.Succeed(time.Unix(e.seconds.Unix(), 0), budgetToken{})
			}
			return Result[T]{Value: v, Code: verd.Code, Attempt: 1, Context: ctx}
		case ctx.Err() != nil: // the caller gave up: its error, as endWith reports it
			return Result[T]{Err: ctx.Err()}
		}
		return Result[T]{Err: err}
	}
	r := getRun[T](e)
	r.e, r.c, r.parent, r.ctx = e, *c, ctx, ctx
	r.maxAttempts, r.limitReason, r.launched, r.inflight = limit, limitReason, 1, 1
	r.first = attempt[T]{info: info, ctx: ctx, end: e.instant(), v: v, err: err, verd: verd}
	r.ready = &r.first
	res := r.carryOn()
	if r.poolable() {
		putRun(e, r)
		recycle(c.Op)
	}
	return res
}

// carryOn drives a plain call on from its first, retryable, result,
// giving back what a panic leaves taken (a retry's budget token) before
// the run can be pooled.
func (r *run[T]) carryOn() Result[T] {
	defer r.unwind()
	return r.loop(true)
}

// getRun takes a finished run from e's pool, or makes one: either way its
// callState is zero and so is the rest, but for a spare hedge timer (see
// run).
func getRun[T any](e *Engine) *run[T] {
	if r, ok := e.runs.Get().(*run[T]); ok { // another T's run is dropped
		return r
	}
	return new(run[T])
}

// putRun clears r's callState, so the pool holds no caller's values, and
// pools it. Only a poolable run may be pooled.
func putRun[T any](e *Engine, r *run[T]) {
	r.callState = callState[T]{}
	e.runs.Put(r)
}

// execute runs the call, admitting it at admitted (see Execute).
func (r *run[T]) execute(admitted *instant) Result[T] {
	e, ctx := r.e, r.parent
	r.maxAttempts = max(1, r.c.Policy.MaxAttempts)
	if h := e.hooks.OnCallStart; h != nil {
		r.ctx = h(ctx, CallStartEvent{Event: Event{Context: ctx, Key: r.c.Key, Subject: r.c.Subject}, Start: r.start})
	}
	if err := ctx.Err(); err != nil {
		return r.end(Result[T]{Err: err}, ReasonCanceled, nil)
	}

	defer r.unwind() // whatever a panic leaves taken (see admission)
	tr, res, ok := r.admit(admitted)
	if !ok {
		return res
	}
	if res, ok := r.prepare(tr, admitted); !ok {
		return res
	}
	// Prepare may have taken a while (it may read the request): the first
	// attempt's launch is a decision of its own.
	launched := e.instant()
	if r.c.Policy.adaptive(e) && r.host != nil {
		r.hk = r.host.hedgeState(e.adaptive)
	}
	r.hedging = r.maxAttempts > 1 && r.c.Policy.hedging(e)
	r.hedgeDelay = r.c.Policy.HedgeDelay
	if r.hedging && r.hk != nil {
		r.hk.deposit()
		r.hedgeDelay = r.hk.current(launched.now())
	}
	if _, ok := r.c.Op.(prompt); r.hedging && !ok {
		// Attempts that may ignore their cancellation run on goroutines
		// of their own from the start, with the caller as the driver.
		r.goConcurrent()
	}
	r.launch(KindInitial, &launched)
	return r.loop(true)
}

// event is the part every call event shares.
func (r *run[T]) event() Event { return Event{Context: r.ctx, Key: r.c.Key, Subject: r.c.Subject} }

// launch starts attempt number launched+1 of kind k at in (the time of its
// admission), handing it the admission taken for it (r.held): the attempt
// holds its ticket and permit from now on, and the tokens are spent.
func (r *run[T]) launch(k AttemptKind, in *instant) {
	ad := r.held
	ad.hk = nil // adaptive hedging's token is spent
	r.held = admission{}
	r.launched++
	switch k {
	case KindRetry:
		r.retries++
	case KindHedge:
		r.hedges++
	}
	a := &r.first
	if r.launched > 1 {
		a = new(attempt[T])
	}
	// a is zero (a new attempt, or the first of a run from getRun): set
	// what is not, rather than assign it whole, which would clear every
	// pointer slot again under the write barrier.
	a.adm = ad
	a.info = AttemptInfo{Number: r.launched, Kind: k, Probe: ad.probe}
	if r.timed(a) {
		a.start = in.now()
	}
	ctx := r.ctx
	if r.hedging || r.c.Policy.PerAttemptTimeout > 0 {
		ctx, a.own = newOwnCtx(r.ctx)
		a.info.Own = true
	}
	a.ctx = ctx
	r.inflight++
	switch sh := r.sh; {
	case !r.hedging:
		r.exec(ctx, a)
		r.ready = a
	case sh == nil: // (only a prompt Op's call is not concurrent from the start)
		r.runInline(ctx, a)
	default:
		sh.mu.Lock()
		sh.active = append(sh.active, a)
		sh.mu.Unlock()
		go r.background(ctx, a)
		r.armHedge()
	}
}

// exec runs one attempt and classifies its result.
func (r *run[T]) exec(ctx context.Context, a *attempt[T]) {
	e := r.e
	if d := r.c.Policy.PerAttemptTimeout; d > 0 && (a.ht == nil || !r.lateTimeout()) {
		a.timer = e.armTimeout(d, &a.own)
	}
	returned := false
	if a.adm.lim != nil || a.adm.probe {
		defer func() {
			if !returned {
				r.unwound(a) // a permit or a probe's slot must not leak if Do or a hook panics
			}
		}()
	}
	if h := e.hooks.OnAttemptStart; h != nil {
		ctx = r.attemptStart(ctx, a, h)
	}
	a.v, a.err = r.c.Op.Do(ctx, a.info)
	a.end = e.instant()
	if r.timed(a) {
		r.measure(ctx, a)
	}
	if a.ht != nil {
		// After this no hedge timer callback touches a (nor arms its
		// timeout), and r.sh says whether the call was handed over.
		r.inlineReturned(a)
	}
	if a.timer != nil && !e.stopTimeout(a.timer) {
		a.timedOut = true
	}
	if a.timedOut && r.parent.Err() == nil {
		r.cutOff(a)
	}
	a.verd = r.c.Op.Classify(a.v, a.err, a.info)
	r.giveBackAfter(a, r.limitResult(a), outcomeNone)
	returned = true
}

// attemptStart fires OnAttemptStart (h) for a, with its carrier if the
// Op makes one, and returns the context the hook returned, a's from now.
func (r *run[T]) attemptStart(ctx context.Context, a *attempt[T], h func(context.Context, AttemptStartEvent) context.Context) context.Context {
	if cr, ok := r.c.Op.(carrier); ok {
		a.info.Carrier = cr.NewCarrier(a.info)
	}
	ctx = h(ctx, AttemptStartEvent{Event: Event{Context: ctx, Key: r.c.Key, Subject: r.c.Subject},
		Attempt: a.info.Number, Kind: a.info.Kind, Probe: a.info.Probe, Carrier: a.info.Carrier})
	a.ctx = ctx
	return ctx
}

// measure reads the timed attempt a's end exactly, for its duration, and
// teaches adaptive hedging the latency of a call's first attempt. ctx is
// the context a ran with.
func (r *run[T]) measure(ctx context.Context, a *attempt[T]) {
	now := a.end.now()
	a.dur = now.Sub(a.start)
	if r.hk != nil && a.info.Kind == KindInitial && r.parent.Err() == nil {
		// The key's latency is its calls' first attempts: what a call
		// would take unhedged. A first attempt that lost to a hedge is
		// cut short by its cancellation: its latency is known only to
		// exceed the time it ran (see lostLatency).
		d := a.dur
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrAttemptLost) {
			d = lostLatency(d)
		}
		r.hk.record(now, d)
	}
}

// cutOff ends attempt a whose per-attempt timeout fired (its cancel may
// still be on its way): the attempt, and any value it returned, is cut
// off, and its error says it timed out.
func (r *run[T]) cutOff(a *attempt[T]) {
	if a.err == nil {
		a.own.cancel(ErrAttemptTimeout) // cancel first, then release
		r.c.Op.Release(a.v)
		var zero T
		a.v = zero
		a.err = context.DeadlineExceeded
	}
	a.err = &attemptTimeoutError{Limit: r.c.Policy.PerAttemptTimeout, Err: a.err}
}

// timed reports whether attempt a is timed: its start and end read
// exactly, for its duration. Only the attempt hooks, adaptive hedging and
// the concurrency limit want it.
func (r *run[T]) timed(a *attempt[T]) bool {
	return r.e.hooks.OnAttemptEnd != nil || r.hk != nil || a.adm.lim != nil
}

// limitResult says what a finished attempt teaches the concurrency limit:
// a per-attempt timeout or an overload answer is congestion; an error, a
// cancellation or a loss to a hedge says nothing of the downstream's
// latency.
func (r *run[T]) limitResult(a *attempt[T]) limitResult {
	switch {
	case r.parent.Err() != nil:
		return limitIgnore
	case a.timedOut, a.verd.Overload:
		return limitOverload
	case a.err != nil:
		return limitIgnore
	}
	return limitGood
}

// unwound runs as exec unwinds, Do or a hook having panicked: it gives
// back what a holds, its result ignored (a probe's slot too, so the next
// call probes again, and the probe's own context is cancelled), and the
// panic goes on.
func (r *run[T]) unwound(a *attempt[T]) {
	probe := a.adm.probe
	r.giveBackAfter(a, limitIgnore, outcomeIgnore)
	if probe {
		a.own.cancel(ErrAttemptLost)
	}
}

// outcome maps a classified attempt to its breaker outcome: a throttle
// (the server asking for less: see Verdict.Throttle) is neither.
func (a *attempt[T]) outcome() outcome {
	switch {
	case a.verd.Throttle:
		return outcomeIgnore
	case a.verd.Retryable:
		return outcomeFailure
	case a.err == nil:
		return outcomeSuccess
	}
	return outcomeIgnore
}

// settle reports a finished attempt to its breaker, at its end, and to
// OnAttemptEnd.
func (r *run[T]) settle(a *attempt[T], o AttemptOutcome, bo outcome) {
	r.giveBackAfter(a, limitIgnore, bo)
	if h := r.e.hooks.OnAttemptEnd; h != nil {
		var v any
		if a.err == nil {
			v = a.v // a pointer for the transport: no allocation
		}
		h(AttemptEndEvent{Event: Event{Context: a.ctx, Key: r.c.Key, Subject: r.c.Subject},
			Attempt: a.info.Number, Kind: a.info.Kind, Probe: a.info.Probe, Code: a.verd.Code,
			Err: a.err, Start: a.start, Duration: a.dur, Outcome: o, Result: v,
			Pushback: o == AttemptRetryable && a.verd.Pushback})
	}
}

// retain makes a the retained result (releasing the one it supersedes) and,
// unless it is already done, lets the operation free what the result holds:
// a retained result waits for a later attempt and must hold nothing that
// attempt needs.
func (r *run[T]) retain(a *attempt[T]) {
	r.release(r.retained)
	r.retained = a
	if !a.kept {
		a.v, a.kept = r.c.Op.Retain(a.ctx, a.v), true
	}
}

// release disposes of an attempt's context and value (nothing for nil): the
// attempt is cancelled first, so nothing waits on a result nobody will read,
// and only then is its value released.
func (r *run[T]) release(a *attempt[T]) {
	if a == nil {
		return
	}
	a.own.cancel(ErrAttemptLost)
	if a.err == nil {
		r.c.Op.Release(a.v)
	}
}

// loop drives the call until it ends. The caller runs it (caller set), and
// after a handover the driver (see hedge.go); the caller's loop then only
// waits for the driver's result.
func (r *run[T]) loop(caller bool) Result[T] {
	for {
		if caller && r.handedOff() {
			return r.awaitFinal()
		}
		var a *attempt[T]
		if sh := r.sh; sh == nil {
			a, r.ready = r.ready, nil
		} else if a = sh.take(); a == nil {
			var fire <-chan time.Time
			if sh.timer != nil {
				fire = sh.timer.C()
			}
			select {
			case <-sh.wake:
			case <-fire:
				r.e.timers.Put(sh.timer) // fired and drained: reusable
				sh.timer = nil
				r.hedge()
			case <-r.parent.Done():
				return r.endWithout(ReasonCanceled, nil)
			}
			continue
		}
		r.inflight--
		if a.panicked != nil {
			r.decide()
			a.own.cancel(ErrAttemptLost)
			if a.timer != nil {
				a.timer.stop()
			}
			r.release(r.retained)
			r.retained = nil
			panic(a.panicked.value)
		}
		if !a.verd.Retryable {
			return r.endWith(a)
		}
		if res, done := r.retry(a); done {
			return res
		}
	}
}
