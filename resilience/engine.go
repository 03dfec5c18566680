package resilience

import (
	"context"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// The engine is split by concern: this file holds its API (Engine, Call,
// Operation, Result); run.go the run loop and an attempt's lifecycle;
// end.go how a call ends; admission.go the breaker and the budget; hedge.go
// hedging; timers.go the pooled timers; sleep.go the retry decision and the
// sleep between attempts.
//
// An attempt's lifecycle has one verb per step: launch, exec, take, settle,
// then retain (kept in case the call gives up) or release. A call's: admit,
// loop (hedge, retry, sleep), decide (no further result is wanted), end.

// Engine runs calls: it admits them through the breakers, launches attempts,
// hedges slow ones, sleeps between retries, spends the budget and decides when
// to give up. It knows nothing of what an attempt does; the caller supplies
// that in a Call. An Engine is safe for concurrent use and is meant to be
// shared by every call to one downstream, so its budget and breakers have
// memory.
//
// Most users want the transport (HTTP) or a Retrier (any function). Build
// an Engine for a client of another protocol whose results own something
// that must be given back when another attempt supersedes them or a hedge
// wins (a stream, a pooled connection, a lease): the Operation's Retain and
// Release are where the engine hands them back, which a Retrier's function
// cannot express. Telemetry instruments an Engine as it does the others
// (NewEngine with telemetry's Telemetry.Engine).
type Engine struct {
	settings Settings // in effect; Settings returns a copy
	policy   Policy   // a zero Policy's fields: the settings'
	clock    clock.Clock
	budget   *retryBudget
	hooks    Hooks
	// The per-key state, when something needs it (a breaker, adaptive
	// hedging, a concurrency limit): nil otherwise.
	hosts    *hostTable
	breakers *breakerSet       // nil when breaking is off
	adaptive *AdaptiveHedging  // nil when adaptive hedging is off
	limit    *ConcurrencyLimit // nil without a concurrency limit
	seconds  *clock.Seconds    // the current second, and through it the clock: where a decision's instant reads (see instant)
	// timed: something wants each call's start time (a call hook);
	// otherwise a call reads no clock before its admission needs one (the
	// budget and a closed breaker make do with the second: see instant).
	timed bool
	// plain: no hook can fire before a call's first result is judged or
	// when it ends, and there is no breaker or adaptive state, so a call's
	// first attempt can run with no run state at all (see Execute).
	plain    bool
	timers   sync.Pool // the driver's stopped hedge timers (clock.Timer), reused to spare allocations
	timeouts sync.Pool // stopped per-attempt timeout timers (*timeoutTimer)
	runs     sync.Pool // finished sequential runs (*run[T]), reused to spare allocations
}

// NewEngine returns an engine for s, whose zero fields take their
// defaults (see Settings), observed by the hooks that each of hooks makes
// for it, combined in order as Combine does. A hooks func is for an
// adapter whose hooks need the engine (telemetry's Telemetry.Engine keeps
// it to read its Stats for gauges); one that needs nothing returns its
// Hooks. NewEngine calls each once, before the engine is ready for use: it
// may keep e, and must not run calls on it or read its Stats until
// NewEngine has returned. NewEngine panics, naming the field, on settings
// that make no sense (Settings.Validate).
func NewEngine(s Settings, hooks ...func(e *Engine) Hooks) *Engine {
	if err := s.Validate(); err != nil {
		panic(err.Error())
	}
	s = s.inEffect()
	e := &Engine{settings: s, policy: s.policy(), clock: s.Clock,
		budget: newRetryBudget(offOr(s.BudgetRatio), offOr(s.BudgetReserve)), seconds: clock.SecondsOf(s.Clock)}
	if s.Breaker != nil || s.AdaptiveHedging != nil || s.ConcurrencyLimit != nil {
		e.hosts = newHostTable(s.MaxKeys)
	}
	if s.Breaker != nil {
		e.breakers = newBreakerSet(*s.Breaker, e.hosts)
	}
	e.adaptive = s.AdaptiveHedging
	if s.ConcurrencyLimit != nil {
		e.limit = s.ConcurrencyLimit
		e.hosts.newLimit = func() *limiter { return newLimiter(e.limit) }
	}
	for _, f := range hooks {
		if f != nil {
			e.hooks = Combine(e.hooks, f(e))
		}
	}
	h := &e.hooks
	e.timed = h.OnCallStart != nil || h.OnCallEnd != nil
	e.plain = !e.timed && e.hosts == nil && h.OnAttemptStart == nil && h.OnAttemptEnd == nil && h.OnResultDone == nil
	return e
}

// instant returns a decision's time on e's clock, nothing read yet.
func (e *Engine) instant() instant { return instant{src: e.seconds} }

// Settings returns the settings the engine runs with, every default filled
// in (a copy: changing it changes nothing).
func (e *Engine) Settings() Settings { return e.settings.clone() }

// Policy returns the policy that a call whose Policy is zero runs under:
// the engine's settings'. A call's Policy overrides it field by field.
func (e *Engine) Policy() Policy { return e.policy }

// fill sets p's zero fields to the engine's: the policy the call runs
// under. (A policy already filled stays as it is: its fields that are off
// say so with Off.)
func (e *Engine) fill(p *Policy) {
	d := &e.policy
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxHedges == 0 {
		p.MaxHedges = d.MaxHedges
	}
	if p.HedgeDelay == 0 {
		p.HedgeDelay = d.HedgeDelay
	}
	if p.Backoff == nil {
		p.Backoff = d.Backoff
	}
	if p.PerAttemptTimeout == 0 {
		p.PerAttemptTimeout = d.PerAttemptTimeout
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = d.MaxRetryAfter
	}
}

// hedging reports whether p hedges on engine e: with a fixed delay, or with
// the adaptive one.
func (p Policy) hedging(e *Engine) bool {
	return p.MaxHedges > 0 && (p.HedgeDelay > 0 || p.adaptive(e))
}

// adaptive reports whether p hedges with the delay learned on e.
func (p Policy) adaptive(e *Engine) bool {
	return p.HedgeDelay == 0 && e.adaptive != nil
}

// Verdict is the classification of one attempt's result.
type Verdict struct {
	// Retryable reports that another attempt may succeed.
	Retryable bool
	// NotIdempotent reports that the result is retryable in kind, but the
	// call may not be repeated for it: the call ends as if Prepare had
	// allowed one attempt, with ReasonNotIdempotent (the breaker and the
	// budget count it as the retryable failure it is). It is for an
	// operation that allows further attempts only for the failures that
	// are safe to repeat whatever the call, such as an HTTP/2 stream the
	// server refused unprocessed; such an operation's call must not hedge.
	NotIdempotent bool
	// Pushback reports that the downstream said the retrying was already
	// done below it (for HTTP: transport.PushbackHeader), so the call
	// launches no further attempt after this result: no retry, no hedge.
	// It changes nothing else: the result counts as what Retryable,
	// Throttle and Overload say (a retryable one is a failure for the
	// breaker, unless a throttle, which the breaker ignores, and for the
	// budget), so a downstream cannot hide its failures behind it. Nor does
	// it cancel an attempt still in flight (a hedge, or the attempt a hedge
	// raced): the call waits for those, as after its last allowed attempt,
	// and ends with the first that is not retryable or, when none is, the
	// most recent result, with ReasonPushback. It means nothing on a result
	// that is not Retryable.
	Pushback bool
	// Overload reports that the downstream answered that it is overloaded
	// (for HTTP: 503, 429): the concurrency limit counts it as congestion,
	// not as a good result, and the retry budget not as a success.
	Overload bool
	// Throttle reports that the downstream asked for less: it is alive and
	// answering, and slowing this client down (for HTTP: a 429, a 503
	// whose Retry-After asks for a wait, or what a classifier marks
	// Throttled). The breaker ignores such a result: it neither counts it
	// as a failure nor clears the failures counted before it, and a
	// half-open breaker's probe that meets one decides nothing (its slot
	// is freed and the next call probes again). A throttle is answered by
	// what slows the client: the server's Retry-After, the retry budget
	// and the concurrency limit. A breaker that opened on it would refuse
	// every call for OpenDuration after a burst of throttling the server
	// had asked to be waited out, turning a brief throttle into an outage;
	// Envoy's outlier detection keeps 429 out of its consecutive-5xx count
	// for the same reason. Set Overload with it: the limit and the budget
	// read Overload (a throttle is congestion, and no success), only the
	// breaker reads Throttle; Retryable still decides whether the call
	// tries again.
	Throttle bool
	// Code is a status code to report in events and hooks (0 if none).
	Code int
	// RetryAfter is a server-dictated delay for the next retry, used instead
	// of the backoff when HasRetryAfter is set.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// AttemptInfo describes one attempt to the Operation's Do.
type AttemptInfo struct {
	Number int // 1-based
	Kind   AttemptKind
	Probe  bool // a half-open breaker's probe: the call's only attempt
	// Own reports that the attempt has a cancelable context of its own
	// (hedging or a per-attempt timeout); otherwise Do receives the call's
	// context itself, or the one OnAttemptStart derived from it.
	Own bool
	// Carrier is the attempt's private metadata that OnAttemptStart saw in
	// its event (see carrier), for Do to send; nil when the Operation makes
	// none or no OnAttemptStart hook is installed.
	Carrier any
}

// prompt may be implemented by an Operation whose Do returns promptly once
// its context is cancelled (an HTTP round trip over http.Transport does);
// CancelsPromptly is the promise, and does nothing. A hedging call then
// runs each attempt on the caller's goroutine until a hedge actually fires,
// so hedging costs no goroutine or channel on the success path; a hedge
// that wins cancels the caller's attempt and is returned once that attempt
// has returned. Without the promise every attempt of a hedging call runs on
// a goroutine of its own, so a winner is returned at once even while a
// loser ignores its cancellation.
type prompt interface{ CancelsPromptly() }

// recycler may be implemented by an Operation that its adapter reuses from
// call to call (the transport pools its own). The engine calls Recycle as
// Execute returns, on the caller's goroutine, when nothing but the caller
// can use the Operation any more: every attempt ran on the caller's
// goroutine and no timer's callback may still run. Otherwise it never
// calls it (after a hedge fired, a late attempt may still be using the
// Operation), and the Operation is left to the garbage collector. The
// adapter must not touch the Operation after Execute returns either way.
type recycler interface{ Recycle() }

// carrier may be implemented by an Operation whose attempts carry metadata
// of their own that hooks may write (the transport: each attempt's copy of
// the request headers, for trace context). The engine calls NewCarrier
// before firing OnAttemptStart, only when that hook is installed, on the
// goroutine that makes the attempt, and hands the value to the hook
// (AttemptStartEvent.Carrier) and then to Do (AttemptInfo.Carrier).
type carrier interface {
	NewCarrier(a AttemptInfo) any
}

// Operation is what a call does, supplied by the adapter (the transport, or
// Retry). The engine calls its methods; Do and Classify may run on attempt
// goroutines, concurrently with each other, when hedging is on.
//
// An Operation may also have any of these methods, which change how the
// engine runs its calls (each is described where its interface is
// declared, in engine.go):
//
//   - CancelsPromptly(): Do returns promptly once its context is
//     cancelled. A hedging call then runs each attempt on the caller's
//     goroutine until a hedge fires (no goroutine on the success path);
//     without it every attempt of a hedging call runs on a goroutine of
//     its own.
//   - Recycle(): called as Execute returns when nothing but the caller can
//     use the Operation any more, so an adapter may pool it.
//   - NewCarrier(AttemptInfo) any: metadata of each attempt that
//     OnAttemptStart may write (the transport: the attempt's request
//     headers, for trace context), handed to Do as AttemptInfo.Carrier.
type Operation[T any] interface {
	// Prepare runs once after admission and before the first attempt with
	// the number of attempts the call may make (1 for a probe). It returns
	// the number it allows (at most that) and, when it allows fewer, the
	// reason to report if a retry is later wanted (ReasonNotIdempotent,
	// ReasonBodyNotReplayable). A non-nil error ends the call before any
	// attempt.
	Prepare(maxAttempts int) (int, EndReason, error)
	// Do makes one attempt.
	Do(ctx context.Context, a AttemptInfo) (T, error)
	// Classify judges an attempt's result.
	Classify(v T, err error, a AttemptInfo) Verdict
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
	// Key selects the per-key state (breaker, adaptive delay, concurrency
	// limit: the host, for the transport) and names the call in events.
	// The empty key is a key like any other.
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

	fin Finisher // what Finish does
}

// Finish ends the returned attempt once its value is no longer in use (for
// HTTP: when the response body is closed or read to EOF): it cancels the
// attempt's own context, if it has one, and fires OnResultDone with err (an
// error that ended the use early, or nil). Call it once for a result with a
// Value; it does nothing for one without.
func (r *Result[T]) Finish(err error) { r.fin.Finish(err) }

// Finisher returns what Finish does, in a few words, for an adapter that
// keeps it until the value's use ends (the transport keeps one in every
// response body it wraps), and whether it does anything at all, so the
// adapter can spare arranging to call it (for HTTP: wrapping the body).
func (r *Result[T]) Finisher() (f Finisher, needed bool) { return r.fin, r.fin.needed() }

// Finisher ends a returned result: see Result.Finish. The zero value does
// nothing. It is a value of a few words, kept whole (an adapter stores it
// inside what it allocates anyway, as the transport does in its body
// wrapper), so finishing costs no allocation of its own.
type Finisher struct {
	own  ownCtx     // the attempt's own context, cancelled at the end
	done resultDone // OnResultDone and its event's fields; hook is nil without it
}

// resultDone is what OnResultDone's event needs.
type resultDone struct {
	hook    func(ResultDoneEvent)
	ctx     context.Context
	key     string
	subject any
	number  int // the attempt's
}

// Finish does what Result.Finish does; call it once.
func (f *Finisher) Finish(err error) {
	f.own.cancel(nil)
	if d := &f.done; d.hook != nil {
		d.hook(ResultDoneEvent{Event: Event{Context: d.ctx, Key: d.key, Subject: d.subject}, Attempt: d.number, Err: err})
	}
}

// needed reports whether Finish does anything.
func (f *Finisher) needed() bool { return f.own.set() || f.done.hook != nil }
