package transport

import (
	"context"
	"net/http"
	"time"

	"github.com/MrVSiK/gotry/internal/hookutil"
	"github.com/MrVSiK/gotry/resilience"
)

// Hooks observe a Transport. Every field is optional and a nil field costs
// nothing. Unless a field says otherwise, a hook runs synchronously on the
// goroutine that called RoundTrip, so keep it fast. No hook is called while
// the transport holds a lock, so hooks may call BudgetTokens or
// BreakerState. A panicking hook is not recovered: the panic propagates out
// of RoundTrip. Request in every event is the caller's original request;
// hooks must not modify it. Events carry no response body.
type Hooks struct {
	// OnRetry fires when a retry is scheduled, before any backoff sleep.
	OnRetry func(RetryEvent)
	// OnHedge fires when a hedge attempt launches.
	OnHedge func(HedgeEvent)
	// OnBreakerStateChange fires after a host's breaker changed state. Calls
	// are not strictly ordered under contention.
	OnBreakerStateChange func(host string, from, to resilience.BreakerState)

	// OnRequestStart fires when RoundTrip begins, before the breaker is
	// asked. The context it returns (derived from ctx) is the parent of
	// every attempt's context, e.g. carrying a span for the whole request.
	OnRequestStart func(ctx context.Context, e RequestStartEvent) context.Context
	// OnAttemptStart fires before each attempt is sent, on the goroutine
	// that sends it (a hedge's own goroutine). The context it returns
	// becomes the attempt request's context; e.Header is that request's
	// private copy of the headers, which the hook may modify (to inject
	// trace context, say).
	OnAttemptStart func(ctx context.Context, e AttemptStartEvent) context.Context
	// OnAttemptEnd fires once per attempt when its outcome is known: its
	// response headers or error arrived and were classified, or it was
	// cancelled. For an attempt that lost a hedge race it may fire on the
	// attempt's goroutine, after RoundTrip returned.
	OnAttemptEnd func(AttemptEndEvent)
	// OnBackoff fires after each backoff sleep longer than zero.
	OnBackoff func(BackoffEvent)
	// OnBudgetExhausted fires when the retry budget refuses a retry or hedge.
	OnBudgetExhausted func(BudgetEvent)
	// OnBreakerReject fires when a breaker refuses a request (Attempt 0)
	// or a later attempt.
	OnBreakerReject func(BreakerRejectEvent)
	// OnRequestEnd fires once, just before RoundTrip returns.
	OnRequestEnd func(RequestEndEvent)
	// OnBodyClosed fires when the body of the response RoundTrip returned is
	// closed or read to EOF, on the goroutine that did so. Installing it
	// wraps every returned body.
	OnBodyClosed func(BodyClosedEvent)
}

// RequestStartEvent describes a request entering RoundTrip.
type RequestStartEvent struct {
	Request *http.Request
	Start   time.Time
}

// AttemptStartEvent describes an attempt about to be sent.
type AttemptStartEvent struct {
	Request *http.Request
	Attempt int // 1-based
	Kind    resilience.AttemptKind
	Probe   bool        // the request is a half-open breaker's probe
	Header  http.Header // the attempt's own headers; the hook may modify them
}

// AttemptEndEvent describes a finished attempt.
type AttemptEndEvent struct {
	Context    context.Context // the attempt's context (as OnAttemptStart returned it)
	Request    *http.Request
	Attempt    int
	Kind       resilience.AttemptKind
	Probe      bool
	StatusCode int   // 0 when the attempt failed with an error
	Err        error // the attempt's error, if any
	Start      time.Time
	Duration   time.Duration // until response headers or error
	Outcome    resilience.AttemptOutcome
}

// RetryEvent describes a scheduled retry.
type RetryEvent struct {
	Context    context.Context // the request's context (as OnRequestStart returned it)
	Request    *http.Request
	Attempt    int           // the attempt that failed
	Delay      time.Duration // the wait before the retry; 0 when it launches at once
	StatusCode int           // the failed attempt's status, 0 on error
	Err        error         // the failed attempt's error, if any
	RetryAfter bool          // Delay came from the response's Retry-After header
}

// BackoffEvent describes a finished backoff sleep.
type BackoffEvent struct {
	Context     context.Context
	Request     *http.Request
	Retry       int           // the retry this sleep preceded, 1-based
	Start       time.Time     // when the sleep began
	Delay       time.Duration // the planned length
	Slept       time.Duration // the actual length
	RetryAfter  bool          // the delay came from Retry-After
	Interrupted bool          // the request's context ended during the sleep
}

// HedgeEvent describes a hedge launch.
type HedgeEvent struct {
	Context  context.Context
	Request  *http.Request
	Attempt  int // the hedge's attempt number
	InFlight int // attempts in flight, the hedge included
	// Delay is the wait that triggered the hedge: the fixed hedge delay, or
	// the one learned for the host when Adaptive (WithAdaptiveHedging).
	Delay    time.Duration
	Adaptive bool
}

// BudgetEvent describes a refusal by the retry budget.
type BudgetEvent struct {
	Context context.Context
	Request *http.Request
	Attempt int                    // the attempt that was refused
	Kind    resilience.AttemptKind // retry or hedge
}

// BreakerRejectEvent describes a refusal by a host's breaker.
type BreakerRejectEvent struct {
	Context context.Context
	Request *http.Request
	Host    string
	Attempt int // 0 when the request was rejected at admission
	State   resilience.BreakerState
}

// RequestEndEvent describes the end of RoundTrip.
type RequestEndEvent struct {
	Context    context.Context
	Request    *http.Request
	Start      time.Time
	Duration   time.Duration // all attempts and sleeps
	Attempts   int           // launched, retries and hedges included
	Retries    int
	Hedges     int
	Backoff    time.Duration // total time slept between attempts
	StatusCode int           // the returned response's status, 0 on error
	Err        error         // the returned error, if any
	Reason     resilience.EndReason
	Probe      bool // the request was a half-open breaker's probe
	// Returned is the number of the attempt whose response was returned
	// (0 when an error was returned); its span, say, should stay open until
	// OnBodyClosed.
	Returned int
}

// BodyClosedEvent describes the returned response body being finished.
type BodyClosedEvent struct {
	Context context.Context // the winning attempt's context
	Request *http.Request
	Attempt int
	Err     error // a read error other than io.EOF, if one ended the body
}

// CombineHooks returns hooks that run a's hook and then b's for every event;
// context-returning hooks are chained (b sees the context a returned), and
// both may modify AttemptStartEvent.Header. Neither argument is modified.
func CombineHooks(a, b Hooks) Hooks {
	return Hooks{
		OnRetry:              hookutil.Both(a.OnRetry, b.OnRetry),
		OnHedge:              hookutil.Both(a.OnHedge, b.OnHedge),
		OnBreakerStateChange: hookutil.Both3(a.OnBreakerStateChange, b.OnBreakerStateChange),
		OnRequestStart:       hookutil.Chain(a.OnRequestStart, b.OnRequestStart),
		OnAttemptStart:       hookutil.Chain(a.OnAttemptStart, b.OnAttemptStart),
		OnAttemptEnd:         hookutil.Both(a.OnAttemptEnd, b.OnAttemptEnd),
		OnBackoff:            hookutil.Both(a.OnBackoff, b.OnBackoff),
		OnBudgetExhausted:    hookutil.Both(a.OnBudgetExhausted, b.OnBudgetExhausted),
		OnBreakerReject:      hookutil.Both(a.OnBreakerReject, b.OnBreakerReject),
		OnRequestEnd:         hookutil.Both(a.OnRequestEnd, b.OnRequestEnd),
		OnBodyClosed:         hookutil.Both(a.OnBodyClosed, b.OnBodyClosed),
	}
}

// engineHooks translates h into the engine's hooks. Only non-nil fields get
// a translation, so a nil transport hook stays free.
func engineHooks(h Hooks) resilience.Hooks {
	var eh resilience.Hooks
	req := func(s any) *http.Request { r, _ := s.(*http.Request); return r }
	if f := h.OnRequestStart; f != nil {
		eh.OnCallStart = func(ctx context.Context, e resilience.CallStartEvent) context.Context {
			return f(ctx, RequestStartEvent{Request: req(e.Subject), Start: e.Start})
		}
	}
	if f := h.OnAttemptEnd; f != nil {
		eh.OnAttemptEnd = func(e resilience.AttemptEndEvent) {
			f(AttemptEndEvent{Context: e.Context, Request: req(e.Subject), Attempt: e.Attempt, Kind: e.Kind,
				Probe: e.Probe, StatusCode: e.Code, Err: e.Err, Start: e.Start, Duration: e.Duration, Outcome: e.Outcome})
		}
	}
	if f := h.OnRetry; f != nil {
		eh.OnRetry = func(e resilience.RetryEvent) {
			f(RetryEvent{Context: e.Context, Request: req(e.Subject), Attempt: e.Attempt, Delay: e.Delay,
				StatusCode: e.Code, Err: e.Err, RetryAfter: e.FromRetryAfter})
		}
	}
	if f := h.OnBackoff; f != nil {
		eh.OnBackoff = func(e resilience.BackoffEvent) {
			f(BackoffEvent{Context: e.Context, Request: req(e.Subject), Retry: e.Retry, Start: e.Start,
				Delay: e.Delay, Slept: e.Slept, RetryAfter: e.FromRetryAfter, Interrupted: e.Interrupted})
		}
	}
	if f := h.OnHedge; f != nil {
		eh.OnHedge = func(e resilience.HedgeEvent) {
			f(HedgeEvent{Context: e.Context, Request: req(e.Subject), Attempt: e.Attempt, InFlight: e.InFlight,
				Delay: e.Delay, Adaptive: e.Adaptive})
		}
	}
	if f := h.OnBudgetExhausted; f != nil {
		eh.OnBudgetExhausted = func(e resilience.BudgetEvent) {
			f(BudgetEvent{Context: e.Context, Request: req(e.Subject), Attempt: e.Attempt, Kind: e.Kind})
		}
	}
	if f := h.OnBreakerReject; f != nil {
		eh.OnBreakerReject = func(e resilience.BreakerRejectEvent) {
			f(BreakerRejectEvent{Context: e.Context, Request: req(e.Subject), Host: e.Key, Attempt: e.Attempt, State: e.State})
		}
	}
	eh.OnBreakerStateChange = h.OnBreakerStateChange
	if f := h.OnRequestEnd; f != nil {
		eh.OnCallEnd = func(e resilience.CallEndEvent) {
			f(RequestEndEvent{Context: e.Context, Request: req(e.Subject), Start: e.Start, Duration: e.Duration,
				Attempts: e.Attempts, Retries: e.Retries, Hedges: e.Hedges, Backoff: e.Backoff,
				StatusCode: e.Code, Err: e.Err, Reason: e.Reason, Probe: e.Probe, Returned: e.Returned})
		}
	}
	return eh
}
