package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TransportHooks returns the hooks that give a transport.Transport its
// spans, metrics and logs:
//
//	tr := transport.New(base, transport.WithHooks(tel.TransportHooks()))
//
// Call it once per Transport: the value holds that transport's log rate
// limiter. Every field is set, so every returned response body is wrapped
// (the winning attempt's span ends when it is closed or read to EOF).
func (t *Telemetry) TransportHooks() transport.Hooks {
	hs := &hookSet{t: t, http: true}
	return transport.Hooks{
		OnRequestStart: func(ctx context.Context, e transport.RequestStartEvent) context.Context {
			c := hs.newHTTPCall(e.Request)
			ctx = c.startCall(ctx, e.Request, e.Start)
			return context.WithValue(ctx, callKey{t}, c)
		},
		OnAttemptStart: func(ctx context.Context, e transport.AttemptStartEvent) context.Context {
			return hs.attemptStart(ctx, e.Request, "", e.Attempt, e.Kind, e.Probe, e.Header)
		},
		OnAttemptEnd: func(e transport.AttemptEndEvent) {
			a := hs.attemptFor(e.Context, e.Request, "", e.Attempt, e.Kind, e.Probe)
			a.end(e.Context, true, e.StatusCode, e.Err, e.Duration, e.Outcome)
		},
		OnRetry: func(e transport.RetryEvent) {
			hs.callFor(e.Context, e.Request, "").retry(e.Context, e.Attempt, e.Delay, e.RetryAfter, e.StatusCode, e.Err)
		},
		OnBackoff: func(e transport.BackoffEvent) {
			hs.callFor(e.Context, e.Request, "").backoffSpan(e.Context, e.Start, e.Delay, e.Slept, e.RetryAfter, e.Interrupted)
		},
		OnHedge: func(e transport.HedgeEvent) {
			hs.callFor(e.Context, e.Request, "").hedge(e.Context, e.Attempt, e.InFlight)
		},
		OnBudgetExhausted: func(e transport.BudgetEvent) {
			hs.callFor(e.Context, e.Request, "").budgetExhausted(e.Context, e.Attempt, e.Kind)
		},
		OnBreakerReject: func(e transport.BreakerRejectEvent) {
			hs.callFor(e.Context, e.Request, "").breakerReject(e.Context, e.Attempt, e.State)
		},
		OnBreakerStateChange: hs.breakerChange,
		OnRequestEnd: func(e transport.RequestEndEvent) {
			hs.callFor(e.Context, e.Request, "").end(e.Context, callEnd{start: e.Start, dur: e.Duration,
				backoff: e.Backoff, attempts: e.Attempts, retries: e.Retries, hedges: e.Hedges,
				code: e.StatusCode, err: e.Err, reason: e.Reason, returned: e.Returned})
		},
		OnBodyClosed: func(e transport.BodyClosedEvent) {
			if a := t.attemptFrom(e.Context); a != nil {
				a.bodyDone(e.Err)
			}
		},
	}
}

// RetrierHooks returns the hooks for a generic resilience.Retrier (or any
// adapter on resilience.Engine that calls OnAttemptStart): the same spans,
// metrics and logs as TransportHooks, with gotry.operation (the call's Key)
// in place of the HTTP attributes and INTERNAL attempt spans. Call it once
// per Retrier.
//
//	r := resilience.NewRetrier(resilience.WithHooks(tel.RetrierHooks()))
func (t *Telemetry) RetrierHooks() resilience.Hooks {
	hs := &hookSet{t: t}
	return resilience.Hooks{
		OnCallStart: func(ctx context.Context, e resilience.CallStartEvent) context.Context {
			c := hs.newOpCall(e.Key)
			ctx = c.startCall(ctx, nil, e.Start)
			return context.WithValue(ctx, callKey{t}, c)
		},
		OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
			return hs.attemptStart(ctx, nil, e.Key, e.Attempt, e.Kind, e.Probe, nil)
		},
		OnAttemptEnd: func(e resilience.AttemptEndEvent) {
			a := hs.attemptFor(e.Context, nil, e.Key, e.Attempt, e.Kind, e.Probe)
			a.end(e.Context, false, e.Code, e.Err, e.Duration, e.Outcome)
		},
		OnRetry: func(e resilience.RetryEvent) {
			hs.callFor(e.Context, nil, e.Key).retry(e.Context, e.Attempt, e.Delay, e.FromRetryAfter, e.Code, e.Err)
		},
		OnBackoff: func(e resilience.BackoffEvent) {
			hs.callFor(e.Context, nil, e.Key).backoffSpan(e.Context, e.Start, e.Delay, e.Slept, e.FromRetryAfter, e.Interrupted)
		},
		OnHedge: func(e resilience.HedgeEvent) {
			hs.callFor(e.Context, nil, e.Key).hedge(e.Context, e.Attempt, e.InFlight)
		},
		OnBudgetExhausted: func(e resilience.BudgetEvent) {
			hs.callFor(e.Context, nil, e.Key).budgetExhausted(e.Context, e.Attempt, e.Kind)
		},
		OnBreakerReject: func(e resilience.BreakerRejectEvent) {
			hs.callFor(e.Context, nil, e.Key).breakerReject(e.Context, e.Attempt, e.State)
		},
		OnBreakerStateChange: hs.breakerChange,
		OnCallEnd: func(e resilience.CallEndEvent) {
			hs.callFor(e.Context, nil, e.Key).end(e.Context, callEnd{start: e.Start, dur: e.Duration,
				backoff: e.Backoff, attempts: e.Attempts, retries: e.Retries, hedges: e.Hedges,
				code: e.Code, err: e.Err, reason: e.Reason, returned: e.Returned})
		},
	}
}

// attemptStart makes the attempt's telemetry: its span (unless otelhttp
// makes it), with its context injected into header when there is one.
func (hs *hookSet) attemptStart(ctx context.Context, req *http.Request, key string, n int, k resilience.AttemptKind, probe bool, header http.Header) context.Context {
	a := &attempt{c: hs.callFor(ctx, req, key), num: n, kind: k, probe: probe}
	if !hs.http || !hs.t.cfg.otelhttp {
		ctx = a.startSpan(ctx, header)
	}
	return context.WithValue(ctx, attemptKey{hs.t}, a)
}

// end handles an attempt's result. hasBody says the adapter returns
// responses whose body ends the span (the transport).
func (a *attempt) end(ctx context.Context, hasBody bool, code int, err error, dur time.Duration, o resilience.AttemptOutcome) {
	a.record(ctx, code, err, dur, o)
	a.spanResult(code, err, o)
	a.log(ctx, code, err, dur, o)
	a.settleSpan(hasBody, err, o)
}

func (c *call) retry(ctx context.Context, n int, delay time.Duration, retryAfter bool, code int, err error) {
	trigger := retryTrigger(code, err)
	source := delaySource(delay.Seconds(), retryAfter)
	c.recordRetry(ctx, trigger, source, delay)
	c.event(eventRetry, KeyAttempt.Int(n), KeyRetryTrigger.String(trigger),
		KeyDelaySource.String(source), KeyBackoffDelay.Float64(delay.Seconds()))
	c.logRetry(ctx, n, delay, trigger, source, code, err)
}

func (c *call) hedge(ctx context.Context, n, inFlight int) {
	c.recordHedge(ctx)
	c.event(eventHedge, KeyAttempt.Int(n), KeyHedgeInFlight.Int(inFlight))
	c.logHedge(ctx, n, inFlight)
}

func (c *call) budgetExhausted(ctx context.Context, n int, k resilience.AttemptKind) {
	c.recordBudgetRefusal(ctx, k)
	c.event(eventBudget, KeyAttempt.Int(n), KeyAttemptKind.String(k.String()))
	c.logBudget(ctx, n, k)
}

func (c *call) breakerReject(ctx context.Context, n int, s resilience.BreakerState) {
	c.recordBreakerReject(ctx)
	c.breakerRejected(n, s)
	c.logBreakerReject(ctx, n, s)
}

func (hs *hookSet) breakerChange(key string, from, to resilience.BreakerState) {
	hs.recordTransition(key, from, to)
	hs.logTransition(key, from, to)
}

func (c *call) end(ctx context.Context, e callEnd) {
	c.recordEnd(ctx, e)
	c.logEnd(ctx, e)
	c.endCall(e)
}
