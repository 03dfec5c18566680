package resilience

import (
	"context"
	"strconv"
	"time"
)

// AttemptKind says why an attempt was launched.
type AttemptKind int

// Attempt kinds.
const (
	KindInitial AttemptKind = iota // the first attempt of a call
	KindRetry                      // launched after a retryable result
	KindHedge                      // launched because the others were slow
)

// String returns "initial", "retry" or "hedge", and "AttemptKind(n)" for a
// value outside them.
func (k AttemptKind) String() string {
	switch k {
	case KindInitial:
		return "initial"
	case KindRetry:
		return "retry"
	case KindHedge:
		return "hedge"
	}
	return "AttemptKind(" + strconv.Itoa(int(k)) + ")"
}

// AttemptOutcome is what became of an attempt.
type AttemptOutcome int

// Attempt outcomes.
const (
	// AttemptSuccess: a non-retryable result without error, returned to the
	// caller.
	AttemptSuccess AttemptOutcome = iota
	// AttemptRetryable: a result classified retryable.
	AttemptRetryable
	// AttemptFailure: a non-retryable error.
	AttemptFailure
	// AttemptCancelled: the attempt lost to another one, or the caller gave
	// up on it; its result (if any) was discarded. Not an error.
	AttemptCancelled
)

// String returns "success", "retryable", "failure" or "cancelled", and
// "AttemptOutcome(n)" for a value outside them.
func (o AttemptOutcome) String() string {
	switch o {
	case AttemptSuccess:
		return "success"
	case AttemptRetryable:
		return "retryable"
	case AttemptFailure:
		return "failure"
	case AttemptCancelled:
		return "cancelled"
	}
	return "AttemptOutcome(" + strconv.Itoa(int(o)) + ")"
}

// EndReason says why a call ended.
type EndReason int

// End reasons. ReasonSuccess and ReasonNotRetryable end a call with its
// final answer; the others are give-ups that suppressed a further attempt.
const (
	ReasonSuccess           EndReason = iota // a non-retryable result without error
	ReasonNotRetryable                       // a non-retryable error (TLS, DNS not found, DontRetry, ...)
	ReasonAttemptsExhausted                  // MaxAttempts reached
	ReasonBudgetExhausted                    // the retry budget refused the next attempt
	ReasonCircuitOpen                        // the breaker rejected the call or its next attempt
	ReasonRetryAfterTooLong                  // Retry-After exceeded the allowed maximum
	ReasonPastDeadline                       // the next attempt would start at or after the caller's deadline (after its delay, or a late wake)
	ReasonNotIdempotent                      // retryable, but the call may not be repeated
	ReasonBodyNotReplayable                  // retryable, but the request body cannot be sent again
	ReasonCanceled                           // the caller's context ended
	ReasonOverloaded                         // the concurrency limit shed the call or its next attempt
	ReasonPushback                           // retryable, but the downstream said the retrying was done below it (Verdict.Pushback)
)

// String returns the reason in snake case, e.g. "attempts_exhausted"; these
// strings are also the telemetry attribute values. A value outside the
// reasons prints as "EndReason(n)".
func (r EndReason) String() string {
	switch r {
	case ReasonSuccess:
		return "success"
	case ReasonNotRetryable:
		return "not_retryable"
	case ReasonAttemptsExhausted:
		return "attempts_exhausted"
	case ReasonBudgetExhausted:
		return "budget_exhausted"
	case ReasonCircuitOpen:
		return "circuit_open"
	case ReasonRetryAfterTooLong:
		return "retry_after_too_long"
	case ReasonPastDeadline:
		return "past_deadline"
	case ReasonNotIdempotent:
		return "not_idempotent"
	case ReasonBodyNotReplayable:
		return "body_not_replayable"
	case ReasonCanceled:
		return "canceled"
	case ReasonOverloaded:
		return "overloaded"
	case ReasonPushback:
		return "pushback"
	}
	return "EndReason(" + strconv.Itoa(int(r)) + ")"
}

// GaveUp reports whether r is a give-up: a further attempt was wanted but
// something stopped it.
func (r EndReason) GaveUp() bool { return r != ReasonSuccess && r != ReasonNotRetryable }

// Event is what every event carries: which call it belongs to. It is
// embedded in every event struct, so e.Context, e.Key and e.Subject read the
// same way on each of them.
type Event struct {
	// Context is the context of the request or call the event belongs to:
	// the attempt's (as OnAttemptStart returned it) for OnAttemptEnd and
	// OnResultDone, the call's (as OnCallStart returned it) for every other
	// event, breaker transitions and budget refusals included, so telemetry
	// can put each event in the right trace. For OnCallStart it is the
	// caller's context. Never nil.
	Context context.Context
	// Key is the breaker key (the host, for the transport) or the
	// operation's name (for Retry).
	Key string
	// Subject is what the adapter passed in Call.Subject, unchanged: the
	// caller's *http.Request for the transport (read it with
	// transport.RequestOf), nil for Retry.
	Subject any
}

// CallStartEvent: a call begins, before admission.
type CallStartEvent struct {
	Event
	Start time.Time
}

// AttemptStartEvent: an attempt is about to be made.
type AttemptStartEvent struct {
	Event
	Attempt int // 1-based
	Kind    AttemptKind
	Probe   bool // the attempt is a half-open breaker's probe
	// Carrier is the attempt's private metadata, when the adapter has some:
	// for the transport, the attempt request's own copy of the headers (read
	// it with transport.HeaderOf), which a hook may modify to inject trace
	// context. nil for Retry.
	Carrier any
}

// AttemptEndEvent: an attempt's result is known and classified, or the
// attempt was cancelled.
type AttemptEndEvent struct {
	Event
	Attempt  int
	Kind     AttemptKind
	Probe    bool
	Code     int   // the result's status code, if the adapter has one (0 otherwise)
	Err      error // the attempt's error, if any
	Start    time.Time
	Duration time.Duration // until the result (for HTTP: the response headers) or the error
	Outcome  AttemptOutcome
	// Pushback reports that the result carried the downstream's pushback
	// and it was honoured (Verdict.Pushback): no further attempt followed
	// it. Its Outcome is still what the result is (retryable, for a
	// failure).
	Pushback bool
	// Result is the attempt's result value as the Operation's Do returned
	// it, or nil when Do returned an error: for the transport its
	// *http.Response (read it with transport.ResponseOf), whose body may
	// already be closed and must not be read, closed or modified. Hooks
	// may read it only while they run.
	Result any
}

// RetryEvent: a retry has been scheduled after a retryable result.
type RetryEvent struct {
	Event
	// Attempt is the number of the attempt that failed.
	Attempt int
	// Delay is how long the engine waits before the retry (0 when it
	// launches at once because another attempt is still in flight).
	Delay time.Duration
	// FromRetryAfter reports that Delay came from the server (Retry-After).
	FromRetryAfter bool
	Code           int   // the failed attempt's status code, 0 if none
	Err            error // the failed attempt's error, if any
}

// BackoffEvent: a backoff sleep has ended (it fires after the sleep).
type BackoffEvent struct {
	Event
	Retry          int           // the retry this sleep precedes, 1-based
	Start          time.Time     // when the sleep began
	Delay          time.Duration // the planned length
	Slept          time.Duration // the actual length (shorter if interrupted)
	FromRetryAfter bool
	Interrupted    bool // the caller's context ended during the sleep
}

// HedgeEvent: a hedge attempt is launching.
type HedgeEvent struct {
	Event
	Attempt  int // the hedge's attempt number
	InFlight int // attempts in flight, the hedge included
	// Delay is the wait that triggered the hedge: the policy's fixed
	// HedgeDelay, or the delay learned for the key when Adaptive.
	Delay    time.Duration
	Adaptive bool
}

// BudgetEvent: the retry budget refused an attempt.
type BudgetEvent struct {
	Event
	Attempt int         // the attempt that was refused
	Kind    AttemptKind // retry or hedge
}

// ShedEvent: the concurrency limit refused an attempt: the call's first
// (Attempt 1: the call ends with ReasonOverloaded and nothing was sent), a
// retry (the call ends) or a hedge (the call goes on without it).
type ShedEvent struct {
	Event
	Attempt     int
	Kind        AttemptKind
	Criticality Criticality
	Limit       int           // the key's limit then
	InFlight    int           // attempts in flight to the key then
	Waited      time.Duration // how long the attempt waited for a permit first
}

// LimitWaitEvent: a call's first attempt found the concurrency limit
// reached, waited, and got a permit.
type LimitWaitEvent struct {
	Event
	Criticality Criticality
	Limit       int
	InFlight    int
	Waited      time.Duration
}

// BreakerRejectEvent: a breaker refused a call (Attempt 0) or a later attempt.
type BreakerRejectEvent struct {
	Event
	Attempt int
	State   BreakerState
}

// BreakerStateEvent: the breaker of Key changed state, during the call the
// event's Context belongs to.
type BreakerStateEvent struct {
	Event
	From, To BreakerState
}

// CallEndEvent: the call is over; the engine is about to return.
type CallEndEvent struct {
	Event
	Start    time.Time
	Duration time.Duration
	Attempts int           // launched, retries and hedges included
	Retries  int           // attempts of kind retry
	Hedges   int           // attempts of kind hedge
	Backoff  time.Duration // total time slept between attempts
	Code     int           // the returned result's status code, if any
	Err      error         // the returned error, if any
	Reason   EndReason
	Probe    bool // the call was a half-open breaker's probe
	// Returned is the number of the attempt whose result was returned (0
	// when an error was returned); its span, say, should stay open until
	// OnResultDone.
	Returned int
}

// ResultDoneEvent: the caller is done with the returned result (see
// Result.Finish).
type ResultDoneEvent struct {
	Event
	Attempt int   // the attempt whose result was returned
	Err     error // an error that ended the use early (for HTTP: a body read error other than io.EOF)
}

// Hooks observe calls: the one set of events of the engine, the transport
// and Retry. Every field is optional; a nil field costs nothing. Hooks run
// synchronously on the goroutine that drives the call (for the transport,
// the one that called RoundTrip), except where a field says otherwise, so
// keep them fast. The engine never calls a hook while holding a lock, so a
// hook may call the Engine's Stats (or the transport's or the Retrier's).
// A hook's panic is not recovered: it propagates to the caller of the call
// (RoundTrip, Retry), on the caller's goroutine, whichever goroutine the
// hook ran on, with everything the call held given back (only an
// OnAttemptEnd that fires after the call returned has no caller to reach:
// see there). Payloads, and the request a Subject points to, must not be
// modified; only an AttemptStartEvent's Carrier may be written.
type Hooks struct {
	// OnCallStart fires when a call begins, before the breaker is asked.
	// The context it returns (which must derive from ctx) is the parent of
	// every attempt's, e.g. carrying a span for the whole call.
	OnCallStart func(ctx context.Context, e CallStartEvent) context.Context
	// OnAttemptStart fires before each attempt, on the goroutine that makes
	// it (a hedge's own goroutine); the context it returns becomes the
	// attempt's context.
	OnAttemptStart func(ctx context.Context, e AttemptStartEvent) context.Context
	// OnAttemptEnd fires once per attempt when its result is known and
	// classified, or it was cancelled. For an attempt that lost a hedge
	// race it may fire on the attempt's goroutine, after the call returned;
	// a panic there has no caller left to reach, and is recovered and
	// dropped rather than kill the process.
	OnAttemptEnd func(e AttemptEndEvent)
	// OnRetry fires when a retry is scheduled, before any sleep and after
	// the failed attempt's result, if it had one, was retained
	// (Operation.Retain: for the transport, its body read into memory and
	// closed), so that attempt is over: telemetry ends its span here.
	OnRetry func(e RetryEvent)
	// OnBackoff fires after each backoff sleep longer than zero.
	OnBackoff func(e BackoffEvent)
	// OnHedge fires when a hedge launches.
	OnHedge func(e HedgeEvent)
	// OnBudgetExhausted fires when the budget refuses a retry or hedge.
	OnBudgetExhausted func(e BudgetEvent)
	// OnBreakerReject fires when a breaker refuses a call or an attempt.
	OnBreakerReject func(e BreakerRejectEvent)
	// OnShed fires when the concurrency limit refuses an attempt.
	OnShed func(e ShedEvent)
	// OnLimitWait fires when a call's first attempt waited for a permit of
	// the concurrency limit and got one, before the attempt starts.
	OnLimitWait func(e LimitWaitEvent)
	// OnBreakerStateChange fires after a breaker changed state, in the
	// context of the call whose admission or attempt moved it (on the
	// attempt's goroutine for a hedge that ends after its call returned).
	// Events for one key are not strictly ordered under contention.
	OnBreakerStateChange func(e BreakerStateEvent)
	// OnCallEnd fires once when the call returns.
	OnCallEnd func(e CallEndEvent)
	// OnResultDone fires once the caller is done with the returned result,
	// on the goroutine that finished it: for the transport, when the
	// response body is closed or read to EOF (installing it wraps every
	// returned body); for Retry, as Retry returns. It does not fire when an
	// error was returned.
	OnResultDone func(e ResultDoneEvent)
}

// Combine returns hooks that call a's hook and then b's for every event.
// Context-returning hooks are chained: b receives the context a returned;
// both may write an AttemptStartEvent's Carrier. Neither argument is
// modified, and a field nil in one argument is the other's func itself.
func Combine(a, b Hooks) Hooks {
	return Hooks{
		OnCallStart:          chain(a.OnCallStart, b.OnCallStart),
		OnAttemptStart:       chain(a.OnAttemptStart, b.OnAttemptStart),
		OnAttemptEnd:         both(a.OnAttemptEnd, b.OnAttemptEnd),
		OnRetry:              both(a.OnRetry, b.OnRetry),
		OnBackoff:            both(a.OnBackoff, b.OnBackoff),
		OnHedge:              both(a.OnHedge, b.OnHedge),
		OnBudgetExhausted:    both(a.OnBudgetExhausted, b.OnBudgetExhausted),
		OnBreakerReject:      both(a.OnBreakerReject, b.OnBreakerReject),
		OnShed:               both(a.OnShed, b.OnShed),
		OnLimitWait:          both(a.OnLimitWait, b.OnLimitWait),
		OnBreakerStateChange: both(a.OnBreakerStateChange, b.OnBreakerStateChange),
		OnCallEnd:            both(a.OnCallEnd, b.OnCallEnd),
		OnResultDone:         both(a.OnResultDone, b.OnResultDone),
	}
}

// both returns a func calling f and then g, or whichever is non-nil.
func both[E any](f, g func(E)) func(E) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(e E) { f(e); g(e) }
}

// chain chains two context-returning hooks: g receives the context f
// returned.
func chain[E any](f, g func(context.Context, E) context.Context) func(context.Context, E) context.Context {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, e E) context.Context { return g(f(ctx, e), e) }
}
