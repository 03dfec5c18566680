package resilience

import (
	"context"
	"time"

	"github.com/MrVSiK/gotry/internal/hookutil"
)

// AttemptKind says why an attempt was launched.
type AttemptKind int

// Attempt kinds.
const (
	KindInitial AttemptKind = iota // the first attempt of a call
	KindRetry                      // launched after a retryable result
	KindHedge                      // launched because the others were slow
)

// String returns "initial", "retry" or "hedge".
func (k AttemptKind) String() string {
	switch k {
	case KindRetry:
		return "retry"
	case KindHedge:
		return "hedge"
	}
	return "initial"
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

// String returns "success", "retryable", "failure" or "cancelled".
func (o AttemptOutcome) String() string {
	switch o {
	case AttemptRetryable:
		return "retryable"
	case AttemptFailure:
		return "failure"
	case AttemptCancelled:
		return "cancelled"
	}
	return "success"
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
	ReasonPastDeadline                       // the next delay would end past the caller's deadline
	ReasonNotIdempotent                      // retryable, but the call may not be repeated
	ReasonBodyNotReplayable                  // retryable, but the request body cannot be sent again
	ReasonCanceled                           // the caller's context ended
)

// String returns the reason in snake case, e.g. "attempts_exhausted"; these
// strings are also the telemetry attribute values.
func (r EndReason) String() string {
	switch r {
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
	}
	return "success"
}

// GaveUp reports whether r is a give-up: a further attempt was wanted but
// something stopped it.
func (r EndReason) GaveUp() bool { return r != ReasonSuccess && r != ReasonNotRetryable }

// Every event carries Context (the call's context as returned by
// OnCallStart, or the attempt's as set by AttemptInfo.Context), Key (the
// breaker key or operation name) and Subject (what the caller passed in
// Call.Subject: the original *http.Request for the transport).

// CallStartEvent: a call begins, before admission.
type CallStartEvent struct {
	Key     string
	Subject any
	Start   time.Time
}

// AttemptStartEvent: an attempt is about to be made.
type AttemptStartEvent struct {
	Key     string
	Subject any
	Attempt int // 1-based
	Kind    AttemptKind
	Probe   bool // the attempt is a half-open breaker's probe
}

// AttemptEndEvent: an attempt's result is known and classified, or the
// attempt was cancelled.
type AttemptEndEvent struct {
	Context  context.Context
	Key      string
	Subject  any
	Attempt  int
	Kind     AttemptKind
	Probe    bool
	Code     int   // the result's status code, if the adapter has one
	Err      error // the attempt's error, if any
	Start    time.Time
	Duration time.Duration
	Outcome  AttemptOutcome
}

// RetryEvent: a retry has been scheduled after a retryable result.
type RetryEvent struct {
	Context context.Context
	Key     string
	Subject any
	// Attempt is the number of the attempt that failed.
	Attempt int
	// Delay is how long the engine waits before the retry (0 when it
	// launches at once because another attempt is still in flight).
	Delay time.Duration
	// FromRetryAfter reports that Delay came from the server (Retry-After).
	FromRetryAfter bool
	Code           int
	Err            error
}

// BackoffEvent: a backoff sleep has ended (it fires after the sleep).
type BackoffEvent struct {
	Context        context.Context
	Key            string
	Subject        any
	Retry          int           // the retry this sleep precedes, 1-based
	Start          time.Time     // when the sleep began
	Delay          time.Duration // the planned length
	Slept          time.Duration // the actual length (shorter if interrupted)
	FromRetryAfter bool
	Interrupted    bool // the caller's context ended during the sleep
}

// HedgeEvent: a hedge attempt is launching.
type HedgeEvent struct {
	Context  context.Context
	Key      string
	Subject  any
	Attempt  int // the hedge's attempt number
	InFlight int // attempts in flight, the hedge included
	// Delay is the wait that triggered the hedge: the policy's fixed
	// HedgeDelay, or the delay learned for the key when Adaptive.
	Delay    time.Duration
	Adaptive bool
}

// BudgetEvent: the retry budget refused an attempt.
type BudgetEvent struct {
	Context context.Context
	Key     string
	Subject any
	Attempt int         // the attempt that was refused
	Kind    AttemptKind // retry or hedge
}

// BreakerRejectEvent: a breaker refused a call (Attempt 0) or a later attempt.
type BreakerRejectEvent struct {
	Context context.Context
	Key     string
	Subject any
	Attempt int
	State   BreakerState
}

// CallEndEvent: the call is over; the engine is about to return.
type CallEndEvent struct {
	Context  context.Context
	Key      string
	Subject  any
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
	// when an error was returned).
	Returned int
}

// Hooks observe the engine. Every field is optional; a nil field costs
// nothing. Hooks run synchronously on the goroutine that drives the call,
// except OnAttemptEnd for an attempt that lost a race, which may run on that
// attempt's goroutine after the call returned. The engine never calls a hook
// while holding a lock, so a hook may read the Budget or Breakers. A
// panicking hook is not recovered. Payloads must not be modified.
type Hooks struct {
	// OnCallStart fires when a call begins. The context it returns (which
	// must derive from ctx) is the parent of every attempt, e.g. to open a
	// span for the whole call.
	OnCallStart func(ctx context.Context, e CallStartEvent) context.Context
	// OnAttemptStart fires before each attempt; the context it returns
	// becomes the attempt's context. The engine itself does not call it:
	// adapters (Retry, the transport) call it where they build the attempt.
	OnAttemptStart func(ctx context.Context, e AttemptStartEvent) context.Context
	// OnAttemptEnd fires once per attempt when its result is classified.
	OnAttemptEnd func(e AttemptEndEvent)
	// OnRetry fires when a retry is scheduled, before any sleep.
	OnRetry func(e RetryEvent)
	// OnBackoff fires after each backoff sleep longer than zero.
	OnBackoff func(e BackoffEvent)
	// OnHedge fires when a hedge launches.
	OnHedge func(e HedgeEvent)
	// OnBudgetExhausted fires when the budget refuses a retry or hedge.
	OnBudgetExhausted func(e BudgetEvent)
	// OnBreakerReject fires when a breaker refuses a call or an attempt.
	OnBreakerReject func(e BreakerRejectEvent)
	// OnBreakerStateChange fires after a breaker changed state. Calls for one
	// key are not strictly ordered under contention.
	OnBreakerStateChange func(key string, from, to BreakerState)
	// OnCallEnd fires once when the call returns.
	OnCallEnd func(e CallEndEvent)
}

// Combine returns hooks that call a's hook and then b's for every event.
// Context-returning hooks are chained: b receives the context a returned.
// Neither argument is modified.
func Combine(a, b Hooks) Hooks {
	return Hooks{
		OnCallStart:          hookutil.Chain(a.OnCallStart, b.OnCallStart),
		OnAttemptStart:       hookutil.Chain(a.OnAttemptStart, b.OnAttemptStart),
		OnAttemptEnd:         hookutil.Both(a.OnAttemptEnd, b.OnAttemptEnd),
		OnRetry:              hookutil.Both(a.OnRetry, b.OnRetry),
		OnBackoff:            hookutil.Both(a.OnBackoff, b.OnBackoff),
		OnHedge:              hookutil.Both(a.OnHedge, b.OnHedge),
		OnBudgetExhausted:    hookutil.Both(a.OnBudgetExhausted, b.OnBudgetExhausted),
		OnBreakerReject:      hookutil.Both(a.OnBreakerReject, b.OnBreakerReject),
		OnBreakerStateChange: hookutil.Both3(a.OnBreakerStateChange, b.OnBreakerStateChange),
		OnCallEnd:            hookutil.Both(a.OnCallEnd, b.OnCallEnd),
	}
}
