package resilience

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Engine runs calls: it admits them through the breakers, launches attempts,
// hedges slow ones, sleeps between retries, spends the budget and decides when
// to give up. It knows nothing of what an attempt does; the caller supplies
// that in a Call. An Engine is safe for concurrent use and is meant to be
// shared by every call to one downstream, so its budget and breakers have
// memory.
type Engine struct {
	clock    clock.Clock
	budget   *Budget
	breakers *Breakers
	hooks    Hooks
	timers   sync.Pool // stopped hedge timers (clock.Timer), reused to spare allocations
	runs     sync.Pool // finished sequential runs (*run[T]), reused to spare allocations
}

// EngineConfig configures an Engine. Every field is optional.
type EngineConfig struct {
	// Budget limits retries and hedges; nil allows them all.
	Budget *Budget
	// Breakers keeps a circuit breaker per call key; nil disables breaking.
	Breakers *Breakers
	// Hooks observe every call.
	Hooks Hooks
	// Clock is the time source; nil means the real clock. Tests inject a fake.
	Clock clock.Clock
}

// NewEngine returns an engine for cfg.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Engine{clock: cfg.Clock, budget: cfg.Budget, breakers: cfg.Breakers, hooks: cfg.Hooks}
}

// Budget returns the engine's retry budget (nil when there is none).
func (e *Engine) Budget() *Budget { return e.budget }

// Breakers returns the engine's breakers (nil when breaking is off).
func (e *Engine) Breakers() *Breakers { return e.breakers }

// Hooks returns the engine's hooks.
func (e *Engine) Hooks() Hooks { return e.hooks }

// Now reads the engine's clock.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// BudgetTokens returns the budget's tokens now (+Inf without a budget).
func (e *Engine) BudgetTokens() float64 { return e.budget.Tokens(e.clock.Now()) }

// Policy is the retry and hedging policy of one call.
type Policy struct {
	// MaxAttempts bounds the attempts of a call, retries and hedges
	// together. Values below 1 mean 1.
	MaxAttempts int
	// MaxHedges is how many extra attempts may be in flight beside the
	// first. Hedging is on when both MaxHedges and HedgeDelay are positive.
	MaxHedges int
	// HedgeDelay is how long to wait for a result before launching a hedge.
	HedgeDelay time.Duration
	// Backoff gives the delay before a retry when nothing else is in flight;
	// nil means retry at once.
	Backoff Backoff
	// PerAttemptTimeout cuts off one attempt (not the whole call) until its
	// result arrives; 0 means none. Such a timeout is retryable.
	PerAttemptTimeout time.Duration
	// MaxRetryAfter is the longest server-dictated delay the engine will
	// honour; a longer one ends the call. Negative means no cap (the
	// caller's deadline still applies).
	MaxRetryAfter time.Duration
}

func (p Policy) hedging() bool { return p.MaxHedges > 0 && p.HedgeDelay > 0 }

// Verdict is the classification of one attempt's result.
type Verdict struct {
	// Retryable reports that another attempt may succeed.
	Retryable bool
	// Code is a status code to report in events and hooks (0 if none).
	Code int
	// RetryAfter is a server-dictated delay for the next retry, used instead
	// of the backoff when HasRetryAfter is set.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// AttemptInfo describes an attempt to Call.Do.
type AttemptInfo struct {
	Number int // 1-based
	Kind   AttemptKind
	Probe  bool // a half-open breaker's probe: the call's only attempt
	// Own reports that the attempt has a cancelable context of its own
	// (hedging or a per-attempt timeout); otherwise Do receives the call's
	// context itself, or the one OnAttemptStart derived from it.
	Own bool
	// Carrier is the attempt's private metadata that OnAttemptStart saw in
	// its event (see Carrier), for Do to send; nil when the Operation makes
	// none or no OnAttemptStart hook is installed.
	Carrier any
}

// Carrier may be implemented by an Operation whose attempts carry metadata
// of their own that hooks may write (the transport: each attempt's copy of
// the request headers, for trace context). The engine calls NewCarrier
// before firing OnAttemptStart, only when that hook is installed, on the
// goroutine that makes the attempt, and hands the value to the hook
// (AttemptStartEvent.Carrier) and then to Do (AttemptInfo.Carrier).
type Carrier interface {
	NewCarrier(a *AttemptInfo) any
}

// Operation is what a call does, supplied by the adapter (the transport, or
// Retry). The engine calls its methods; Do and Classify may run on attempt
// goroutines, concurrently with each other, when hedging is on.
type Operation[T any] interface {
	// Prepare runs once after admission and before the first attempt with
	// the number of attempts the call may make (1 for a probe). It returns
	// the number it allows (at most that) and, when it allows fewer, the
	// reason to report if a retry is later wanted (ReasonNotIdempotent,
	// ReasonBodyNotReplayable). A non-nil error ends the call before any
	// attempt.
	Prepare(maxAttempts int) (int, EndReason, error)
	// Do makes one attempt.
	Do(ctx context.Context, a *AttemptInfo) (T, error)
	// Classify judges an attempt's result.
	Classify(v T, err error, a *AttemptInfo) Verdict
	// Retain is called on a retryable result that the call keeps in case it
	// gives up, at the moment another attempt is about to follow (a retry
	// after its backoff, or a hedge still in flight). It must free whatever
	// v holds that the next attempt may need (for HTTP, the connection: the
	// body is read into memory, bounded, and the original closed) and return
	// what to keep. ctx is the attempt's context; Retain must return once it
	// is done. A result that is returned at once is never retained.
	Retain(ctx context.Context, v T) T
	// Release disposes of a result that will not be returned (a loser, or a
	// retryable result superseded by a later one). The attempt's own
	// context, if it has one, is already cancelled: Release only closes.
	Release(v T)
}

// Call is one unit of work for Execute.
type Call[T any] struct {
	// Key selects the breaker (the host, for the transport) and names the
	// call in events. An empty key skips the breaker.
	Key string
	// Subject is passed through to every event unchanged.
	Subject any
	// Policy is this call's policy.
	Policy Policy
	// Op makes and judges the attempts.
	Op Operation[T]
}

// Result is what Execute returns.
type Result[T any] struct {
	// Value is the returned result: the winner's, or the most recent
	// retryable one on give-up. Err is nil when Value is set.
	Value T
	// Err is the returned error: the caller's context error, a
	// *CircuitOpenError, an attempt's error, or an *Error wrapping the last
	// one when more than one attempt launched.
	Err error
	// Code is the returned result's status code from its Verdict.
	Code int
	// Attempt is the number of the attempt that produced Value (0 if none).
	Attempt int
	// Context is that attempt's context.
	Context context.Context

	// What Finish does: cancel the returned attempt's own context, fire
	// OnResultDone with the event.
	cancel context.CancelCauseFunc
	onDone func(ResultDoneEvent)
	done   ResultDoneEvent
}

// Finish ends the returned attempt once its value is no longer in use (for
// HTTP: when the response body is closed or read to EOF): it cancels the
// attempt's own context, if it has one, and fires OnResultDone with err (an
// error that ended the use early, or nil). Call it once for a result with a
// Value; it does nothing for one without, or when NeedsFinish is false.
func (r *Result[T]) Finish(err error) {
	if r.cancel != nil {
		r.cancel(nil)
	}
	if r.onDone != nil {
		e := r.done
		e.Err = err
		r.onDone(e)
	}
}

// NeedsFinish reports whether Finish does anything, so an adapter can spare
// arranging to call it (for HTTP: wrapping the response body).
func (r *Result[T]) NeedsFinish() bool { return r.cancel != nil || r.onDone != nil }

// attempt is one attempt in flight or done.
type attempt[T any] struct {
	info   AttemptInfo
	ctx    context.Context         // the attempt's context, as OnAttemptStart returned it
	cancel context.CancelCauseFunc // nil when the attempt shares the call's context
	timer  clock.Timer             // the per-attempt timeout, if any
	ticket Ticket
	start  time.Time
	dur    time.Duration
	v      T
	err    error
	verd   Verdict
	kept   bool // Retain has run on v

	panicked *attemptPanic // set when the attempt panicked on its own goroutine
}

// attemptPanic carries a panic from an attempt's goroutine to the caller's.
type attemptPanic struct{ value any }

// run is the state of one Execute. Fields are owned by the goroutine
// running Execute, except where noted.
type run[T any] struct {
	e      *Engine
	c      Call[T]
	parent context.Context // the caller's context
	ctx    context.Context // the call's context (after OnCallStart)
	start  time.Time

	maxAttempts int
	limitReason EndReason // reason reported when maxAttempts was cut by Prepare
	probe       bool
	hedge       bool // hedging is on: attempts run on goroutines

	launched, retries, hedges, inflight int
	backoffRetries                      int // retries that used the backoff
	prevDelay, slept                    time.Duration
	retained                            *attempt[T] // most recent retryable result with a value
	errs                                errorLog

	ready *attempt[T]   // the finished attempt, in sequential mode
	wake  chan struct{} // hedging mode: signalled (capacity 1) when done grows
	timer clock.Timer   // the hedge timer

	first attempt[T] // the first attempt, allocated with the run

	// In hedging mode, attempt goroutines and the driving goroutine share
	// these. Both lists hold only attempts in flight or finished and not yet
	// taken, so the memory of a call is bounded by its attempts in flight,
	// never by MaxAttempts.
	mu        sync.Mutex     // guards decided, active and done
	decided   bool           // the call has returned; late attempts release themselves
	active    []*attempt[T]  // attempts launched and not yet taken by the loop, for cancellation
	done      []*attempt[T]  // finished attempts waiting for the loop, oldest first
	activeBuf [4]*attempt[T] // backs active for the common small case
	doneBuf   [2]*attempt[T] // backs done for the common small case
}

// Execute runs c on e and returns its result. It never panics on a
// well-formed call; a panicking hook or Do propagates.
func Execute[T any](ctx context.Context, e *Engine, c Call[T]) Result[T] {
	r, _ := e.runs.Get().(*run[T]) // another T's run is dropped
	if r == nil {
		r = new(run[T])
	}
	*r = run[T]{e: e, c: c, parent: ctx, ctx: ctx, start: e.clock.Now()}
	res := r.execute()
	// Without hedging every attempt ran on this goroutine and nothing of r
	// outlives the call (results, events and the winner's cancel func are
	// copies), so the state can be reused. With hedging, late attempts still
	// hold r: it is left to the garbage collector.
	if !r.hedge {
		*r = run[T]{}
		e.runs.Put(r)
	}
	return res
}

// execute runs the call; see Execute.
func (r *run[T]) execute() Result[T] {
	e, c, ctx := r.e, r.c, r.parent
	r.maxAttempts = max(1, r.c.Policy.MaxAttempts)
	if h := e.hooks.OnCallStart; h != nil {
		r.ctx = h(ctx, CallStartEvent{Event: Event{Context: ctx, Key: c.Key, Subject: c.Subject}, Start: r.start})
	}
	if err := ctx.Err(); err != nil {
		return r.end(Result[T]{Err: err}, ReasonCanceled)
	}

	var ticket Ticket
	if e.breakers != nil && c.Key != "" {
		t, tr, err := e.breakers.Admit(c.Key, r.start)
		r.report(tr)
		if err != nil {
			if h := e.hooks.OnBreakerReject; h != nil {
				var coe *CircuitOpenError
				errors.As(err, &coe)
				h(BreakerRejectEvent{Event: r.event(), State: coe.State})
			}
			return r.end(Result[T]{Err: err}, ReasonCircuitOpen)
		}
		ticket = t
	}
	if ticket.Probe() {
		r.probe = true
		r.maxAttempts = 1
	}
	r.limitReason = ReasonAttemptsExhausted
	n, why, err := c.Op.Prepare(r.maxAttempts)
	if err != nil {
		r.report(e.breakers.Done(ticket, OutcomeIgnore, e.clock.Now()))
		return r.end(Result[T]{Err: err}, ReasonNotRetryable)
	}
	if n < r.maxAttempts {
		r.maxAttempts = max(1, n)
		r.limitReason = why
	}
	if r.probe {
		r.limitReason = ReasonCircuitOpen
	}
	e.budget.Deposit(r.start)
	r.hedge = r.maxAttempts > 1 && r.c.Policy.hedging()
	if r.hedge {
		r.wake = make(chan struct{}, 1)
		r.active = r.activeBuf[:0]
		r.done = r.doneBuf[:0]
	}
	r.launch(KindInitial, ticket)
	return r.loop()
}

// event is the part every call event shares.
func (r *run[T]) event() Event { return Event{Context: r.ctx, Key: r.c.Key, Subject: r.c.Subject} }

// report forwards a breaker transition to the hook, in the call's context.
// Never called with a lock held.
func (r *run[T]) report(tr Transition) {
	if h := r.e.hooks.OnBreakerStateChange; h != nil && tr.Changed() {
		h(BreakerStateEvent{Event: Event{Context: r.ctx, Key: tr.Key, Subject: r.c.Subject}, From: tr.From, To: tr.To})
	}
}

// launch starts attempt number launched+1 of kind k with breaker ticket t.
func (r *run[T]) launch(k AttemptKind, t Ticket) {
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
	*a = attempt[T]{ticket: t, info: AttemptInfo{Number: r.launched, Kind: k, Probe: t.Probe()}}
	ctx := r.ctx
	if r.hedge || r.c.Policy.PerAttemptTimeout > 0 {
		ctx, a.cancel = context.WithCancelCause(r.ctx)
		a.info.Own = true
	}
	a.ctx = ctx
	r.inflight++
	if !r.hedge {
		r.exec(ctx, a)
		r.ready = a
		return
	}
	r.mu.Lock()
	r.active = append(r.active, a)
	r.mu.Unlock()
	go r.background(ctx, a)
	r.armHedge()
}

// background runs an attempt on its own goroutine (hedging mode) and hands
// the result to the driving goroutine, or discards it if the call is over.
func (r *run[T]) background(ctx context.Context, a *attempt[T]) {
	func() {
		// A panic in Do, Classify or a hook on this goroutine is handed to
		// the goroutine that called Execute, which re-panics with it, so it
		// propagates to the caller as it would without hedging.
		defer func() {
			if p := recover(); p != nil {
				a.panicked = &attemptPanic{value: p}
			}
		}()
		r.exec(ctx, a)
		if a.verd.Retryable && a.err == nil && ctx.Err() == nil {
			// Another attempt is in flight or may follow: free the
			// connection now, here, so the driving goroutine never waits
			// on this body. Bounded by ctx, which is cancelled if the call
			// is decided meanwhile.
			a.v, a.kept = r.c.Op.Retain(ctx, a.v), true
		}
	}()
	r.mu.Lock()
	if !r.decided {
		r.done = append(r.done, a)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default: // a signal is already pending
		}
		return
	}
	r.mu.Unlock()
	r.discard(a)
}

// next takes the oldest finished attempt, or nil when none is waiting.
func (r *run[T]) next() *attempt[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.done) == 0 {
		return nil
	}
	a := r.done[0]
	n := copy(r.done, r.done[1:])
	r.done[n] = nil
	r.done = r.done[:n]
	return a
}

// exec runs one attempt and classifies its result.
func (r *run[T]) exec(ctx context.Context, a *attempt[T]) {
	e := r.e
	if d := r.c.Policy.PerAttemptTimeout; d > 0 {
		cancel := a.cancel
		a.timer = e.clock.AfterFunc(d, func() { cancel(ErrAttemptTimeout) })
	}
	timed := e.hooks.OnAttemptEnd != nil // timing costs two clock reads; only hooks want it
	if timed {
		a.start = e.clock.Now()
	}
	if h := e.hooks.OnAttemptStart; h != nil {
		if cr, ok := r.c.Op.(Carrier); ok {
			a.info.Carrier = cr.NewCarrier(&a.info)
		}
		ctx = h(ctx, AttemptStartEvent{Event: Event{Context: ctx, Key: r.c.Key, Subject: r.c.Subject},
			Attempt: a.info.Number, Kind: a.info.Kind, Probe: a.info.Probe, Carrier: a.info.Carrier})
		a.ctx = ctx
	}
	a.v, a.err = r.c.Op.Do(ctx, &a.info)
	if timed {
		a.dur = e.clock.Now().Sub(a.start)
	}
	if a.timer != nil && !a.timer.Stop() && r.parent.Err() == nil {
		// The timeout fired (its cancel may still be on its way): the
		// attempt, and any body it returned, is cut off.
		if a.err == nil {
			a.cancel(ErrAttemptTimeout) // cancel first, then release
			r.c.Op.Release(a.v)
			var zero T
			a.v = zero
		}
		if a.err == nil {
			a.err = context.DeadlineExceeded
		}
		a.err = &attemptTimeoutError{timeout: r.c.Policy.PerAttemptTimeout, err: a.err}
	}
	a.verd = r.c.Op.Classify(a.v, a.err, &a.info)
}

// outcome maps a classified attempt to its breaker outcome.
func (a *attempt[T]) outcome() Outcome {
	switch {
	case a.verd.Retryable:
		return OutcomeFailure
	case a.err == nil:
		return OutcomeSuccess
	}
	return OutcomeIgnore
}

// settle reports a finished attempt to its breaker and to OnAttemptEnd.
func (r *run[T]) settle(a *attempt[T], o AttemptOutcome, bo Outcome) {
	if a.ticket.b != nil { // only a breaker needs the time
		r.report(r.e.breakers.Done(a.ticket, bo, r.e.clock.Now()))
	}
	if h := r.e.hooks.OnAttemptEnd; h != nil {
		h(AttemptEndEvent{Event: Event{Context: a.ctx, Key: r.c.Key, Subject: r.c.Subject},
			Attempt: a.info.Number, Kind: a.info.Kind, Probe: a.info.Probe, Code: a.verd.Code,
			Err: a.err, Start: a.start, Duration: a.dur, Outcome: o})
	}
}

// release disposes of an attempt's context and value: the attempt is
// cancelled first, so nothing waits on a result nobody will read, and only
// then is its value released.
func (r *run[T]) release(a *attempt[T]) {
	if a.cancel != nil {
		a.cancel(ErrAttemptLost)
	}
	if a.err == nil {
		r.c.Op.Release(a.v)
	}
}

// discard handles an attempt that finished after the call was decided.
func (r *run[T]) discard(a *attempt[T]) {
	bo := OutcomeIgnore
	if a.err == nil {
		bo = a.outcome()
	}
	r.release(a)
	r.settle(a, AttemptCancelled, bo)
}

// armHedge (re)arms the hedge timer when another hedge could launch.
func (r *run[T]) armHedge() {
	if !r.hedge || r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
		r.stopHedge()
		return
	}
	if r.timer == nil {
		if t, ok := r.e.timers.Get().(clock.Timer); ok {
			t.Reset(r.c.Policy.HedgeDelay)
			r.timer = t
			return
		}
		r.timer = r.e.clock.NewTimer(r.c.Policy.HedgeDelay)
		return
	}
	r.timer.Stop()
	r.timer.Reset(r.c.Policy.HedgeDelay)
}

// stopHedge disarms the hedge timer and returns it to the pool. With Go
// 1.23+ timer semantics (and the fake clock's), a stopped timer delivers no
// stale value, so a pooled timer is as good as a new one.
func (r *run[T]) stopHedge() {
	if r.timer != nil {
		r.timer.Stop()
		r.e.timers.Put(r.timer)
		r.timer = nil
	}
}

// admitNext asks the budget, then the breaker, for one more attempt of kind
// k. It returns the breaker's ticket and the budget's token (to refund if the
// attempt does not launch after all), or the reason it was refused. A
// token taken before a refusal by the breaker is refunded here.
func (r *run[T]) admitNext(k AttemptKind) (Ticket, BudgetToken, EndReason, bool) {
	tok, ok := r.spend(k)
	if !ok {
		return Ticket{}, tok, ReasonBudgetExhausted, false
	}
	t, ok := r.admitBreaker()
	if !ok {
		tok.Refund()
		return t, BudgetToken{}, ReasonCircuitOpen, false
	}
	return t, tok, 0, true
}

// spend takes one token from the budget for an attempt of kind k, reporting
// a refusal to OnBudgetExhausted.
func (r *run[T]) spend(k AttemptKind) (BudgetToken, bool) {
	tok, ok := r.e.budget.Take(r.e.clock.Now())
	if !ok {
		if h := r.e.hooks.OnBudgetExhausted; h != nil {
			h(BudgetEvent{Event: r.event(), Attempt: r.launched + 1, Kind: k})
		}
	}
	return tok, ok
}

// admitBreaker asks the breaker to admit one more attempt, reporting a
// refusal to OnBreakerReject.
func (r *run[T]) admitBreaker() (Ticket, bool) {
	e := r.e
	if e.breakers == nil || r.c.Key == "" {
		return Ticket{}, true
	}
	t, tr, err := e.breakers.AdmitRetry(r.c.Key, e.clock.Now())
	r.report(tr)
	if err != nil {
		if h := e.hooks.OnBreakerReject; h != nil {
			var coe *CircuitOpenError
			errors.As(err, &coe)
			h(BreakerRejectEvent{Event: r.event(), Attempt: r.launched + 1, State: coe.State})
		}
		return t, false
	}
	return t, true
}

// loop drives the call until it ends.
func (r *run[T]) loop() Result[T] {
	for {
		var a *attempt[T]
		if !r.hedge {
			a, r.ready = r.ready, nil
		} else if a = r.next(); a == nil {
			var fire <-chan time.Time
			if r.timer != nil {
				fire = r.timer.C()
			}
			select {
			case <-r.wake:
			case <-fire:
				r.e.timers.Put(r.timer) // fired and drained: reusable
				r.timer = nil
				r.tryHedge()
			case <-r.parent.Done():
				return r.finish(ReasonCanceled)
			}
			continue
		}
		r.inflight--
		r.forget(a)
		if a.panicked != nil {
			r.decide()
			if a.cancel != nil {
				a.cancel(ErrAttemptLost)
			}
			if a.timer != nil {
				a.timer.Stop()
			}
			r.drop(r.retained)
			r.retained = nil
			panic(a.panicked.value)
		}
		if !a.verd.Retryable {
			return r.win(a)
		}
		if res, done := r.retryable(a); done {
			return res
		}
	}
}

// forget removes a from the in-flight list.
func (r *run[T]) forget(a *attempt[T]) {
	if !r.hedge {
		return
	}
	r.mu.Lock()
	for i, x := range r.active {
		if x == a {
			n := copy(r.active[i:], r.active[i+1:])
			r.active[i+n] = nil
			r.active = r.active[:i+n]
			break
		}
	}
	r.mu.Unlock()
}

// tryHedge launches a hedge if the limits allow it.
func (r *run[T]) tryHedge() {
	if r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
		return
	}
	t, _, _, ok := r.admitNext(KindHedge)
	if !ok {
		return // no re-arm: the next launch re-arms the timer
	}
	if h := r.e.hooks.OnHedge; h != nil {
		h(HedgeEvent{Event: r.event(), Attempt: r.launched + 1, InFlight: r.inflight + 1})
	}
	r.launch(KindHedge, t)
}

// win returns a non-retryable result.
func (r *run[T]) win(a *attempt[T]) Result[T] {
	if r.parent.Err() != nil && a.err != nil {
		r.settle(a, AttemptCancelled, OutcomeIgnore)
		return r.finish(ReasonCanceled)
	}
	o, reason := AttemptSuccess, ReasonSuccess
	if a.err != nil {
		o, reason = AttemptFailure, ReasonNotRetryable
	}
	r.settle(a, o, a.outcome())
	r.drop(r.retained)
	r.retained = nil
	if a.err != nil {
		r.errs.add(a.err)
		if a.cancel != nil {
			a.cancel(nil)
		}
		return r.end(Result[T]{Err: r.wrap(a.err, reason)}, reason)
	}
	return r.end(r.resultOf(a), reason)
}

// drop releases a retained result, if any.
func (r *run[T]) drop(a *attempt[T]) {
	if a != nil {
		r.release(a)
	}
}

// resultOf returns a's result, to be finished by the caller.
func (r *run[T]) resultOf(a *attempt[T]) Result[T] {
	res := Result[T]{Value: a.v, Code: a.verd.Code, Attempt: a.info.Number, Context: a.ctx, cancel: a.cancel}
	if h := r.e.hooks.OnResultDone; h != nil {
		res.onDone = h
		res.done = ResultDoneEvent{Event: Event{Context: a.ctx, Key: r.c.Key, Subject: r.c.Subject}, Attempt: a.info.Number}
	}
	return res
}

// retain makes a the retained result (releasing the one it supersedes) and,
// unless it is already done, lets the operation free what the result holds:
// a retained result waits for a later attempt and must hold nothing that
// attempt needs.
func (r *run[T]) retain(a *attempt[T]) {
	r.drop(r.retained)
	r.retained = a
	if !a.kept {
		a.v, a.kept = r.c.Op.Retain(a.ctx, a.v), true
	}
}

// retryable handles a retryable result; it reports done with the final
// result when the call ends.
func (r *run[T]) retryable(a *attempt[T]) (Result[T], bool) {
	r.settle(a, AttemptRetryable, OutcomeFailure)
	if a.err != nil {
		r.errs.add(a.err)
		if a.cancel != nil {
			a.cancel(nil)
		}
	}
	keep := func() { // a is superseded for now, but may still be returned
		if a.err == nil {
			r.retain(a)
		}
	}
	if r.parent.Err() != nil {
		return r.giveUp(a, ReasonCanceled), true // finish releases a
	}
	if r.launched >= r.maxAttempts {
		if r.inflight > 0 {
			keep()
			return Result[T]{}, false
		}
		return r.giveUp(a, r.limitReason), true
	}
	if r.inflight > 0 {
		// Another attempt is still running: replace this one at once.
		keep()
		t, _, _, ok := r.admitNext(KindRetry)
		if ok {
			r.onRetry(a, 0, false)
			r.launch(KindRetry, t)
		}
		return Result[T]{}, false
	}

	delay, fromServer := r.c.Policy.Backoff, a.verd.HasRetryAfter
	var d time.Duration
	if fromServer {
		d = max(a.verd.RetryAfter, 0)
		if r.c.Policy.MaxRetryAfter >= 0 && d > r.c.Policy.MaxRetryAfter {
			return r.giveUp(a, ReasonRetryAfterTooLong), true
		}
	} else if delay != nil {
		d = clampDelay(delay.Delay(r.backoffRetries+1, r.prevDelay))
	}
	now := r.e.clock.Now()
	if dl, ok := r.parent.Deadline(); ok && now.Add(d).After(dl) {
		return r.giveUp(a, ReasonPastDeadline), true
	}
	// The budget is asked before the sleep, so an exhausted budget ends the
	// call at once, and the token is refunded if the retry does not launch.
	tok, ok := r.spend(KindRetry)
	if !ok {
		return r.giveUp(a, ReasonBudgetExhausted), true
	}
	if !fromServer {
		r.backoffRetries++
		r.prevDelay = d
	}
	keep() // the retry follows: free what a holds before sleeping
	r.onRetry(a, d, fromServer)
	if d > 0 {
		// Time spent retaining counts against the delay.
		rest := d - r.e.clock.Now().Sub(now)
		if !r.sleep(max(rest, 0), d, fromServer) {
			tok.Refund()
			return r.finish(ReasonCanceled), true
		}
	}
	t, ok := r.admitBreaker()
	if !ok {
		tok.Refund()
		return r.finish(ReasonCircuitOpen), true
	}
	r.launch(KindRetry, t)
	return Result[T]{}, false
}

// giveUp ends the call after a's retryable result with nothing else in
// flight: a is returned as it is (never retained), or its error wrapped.
func (r *run[T]) giveUp(a *attempt[T], reason EndReason) Result[T] {
	if a.err == nil {
		r.drop(r.retained)
		r.retained = a
	}
	return r.finish(reason)
}

func (r *run[T]) onRetry(a *attempt[T], d time.Duration, fromServer bool) {
	if h := r.e.hooks.OnRetry; h != nil {
		h(RetryEvent{Event: r.event(), Attempt: a.info.Number,
			Delay: d, FromRetryAfter: fromServer, Code: a.verd.Code, Err: a.err})
	}
}

// sleep waits wait (the part of the backoff delay d still to go) unless the
// caller's context ends first; it reports whether the full delay passed. The
// hedge timer is paused (nothing is in flight).
func (r *run[T]) sleep(wait, d time.Duration, fromServer bool) bool {
	r.stopHedge()
	start := r.e.clock.Now()
	ok := true
	if wait > 0 {
		t := r.e.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-r.parent.Done():
			t.Stop()
			ok = false
		}
	} else {
		ok = r.parent.Err() == nil
	}
	slept := r.e.clock.Now().Sub(start)
	if ok {
		slept = max(slept, wait)
	}
	r.slept += slept
	if h := r.e.hooks.OnBackoff; h != nil {
		h(BackoffEvent{Event: r.event(), Retry: r.retries + 1,
			Start: start, Delay: d, Slept: slept, FromRetryAfter: fromServer, Interrupted: !ok})
	}
	return ok
}

// finish ends the call without a winner.
func (r *run[T]) finish(reason EndReason) Result[T] {
	r.decide()
	if err := r.parent.Err(); err != nil {
		r.drop(r.retained)
		r.retained = nil
		return r.end(Result[T]{Err: err}, ReasonCanceled)
	}
	if a := r.retained; a != nil {
		r.retained = nil
		return r.end(r.resultOf(a), reason)
	}
	last := r.errs.last()
	if last == nil {
		last = fmt.Errorf("resilience: %s gave up without a result (%s)", r.c.Key, reason)
	}
	return r.end(Result[T]{Err: r.wrap(last, reason)}, reason)
}

// wrap wraps a final error in *Error when more than one attempt launched.
func (r *run[T]) wrap(err error, reason EndReason) error {
	if r.launched <= 1 {
		return err
	}
	return &Error{Attempts: r.launched, Err: err, Errs: r.errs.kept(), Omitted: r.errs.omitted, Reason: reason}
}

// decide marks the call decided, cancels the attempts in flight and discards
// results that arrived but were not read. Attempts finishing later discard
// themselves.
func (r *run[T]) decide() {
	r.stopHedge()
	if !r.hedge {
		return
	}
	r.mu.Lock()
	if r.decided {
		r.mu.Unlock()
		return
	}
	r.decided = true
	active, late := r.active, r.done
	r.active, r.done = nil, nil
	r.mu.Unlock()
	for _, a := range active {
		if a.cancel != nil {
			a.cancel(ErrAttemptLost)
		}
	}
	for _, a := range late {
		r.discard(a)
	}
}

func (r *run[T]) end(res Result[T], reason EndReason) Result[T] {
	r.decide()
	if h := r.e.hooks.OnCallEnd; h != nil {
		now := r.e.clock.Now()
		h(CallEndEvent{Event: r.event(), Start: r.start,
			Duration: now.Sub(r.start), Attempts: r.launched, Retries: r.retries, Hedges: r.hedges,
			Backoff: r.slept, Code: res.Code, Err: res.Err, Reason: reason, Probe: r.probe, Returned: res.Attempt})
	}
	return res
}
