package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Hooks returns the hooks that give a transport.Transport or a
// resilience.Retrier its spans, metrics and logs:
//
//	tr := transport.New(base, transport.WithHooks(tel.Hooks()))
//	r := resilience.NewRetrier(resilience.WithHooks(tel.Hooks()))
//
// A call of the transport (its events' Subject is the request) gets the
// HTTP attributes and CLIENT attempt spans; any other call gets
// gotry.operation (the call's Key) in their place and INTERNAL attempt
// spans. Call it once per Transport or Retrier: the value holds that one's
// log rate limiter. Every field is set, so every response body the
// transport returns is wrapped (the winning attempt's span ends when it is
// closed or read to EOF). Its metrics carry no gotry.transport; NamedHooks
// adds it.
//
// A transport whose base is an otelhttp.Transport needs WithOtelhttpAttempts,
// or every attempt gets two CLIENT spans; HooksFor(base) sees to it.
func (t *Telemetry) Hooks() resilience.Hooks { return t.hooks("", t.cfg.otelhttp) }

// NamedHooks is Hooks whose every metric carries gotry.transport=name
// (none when name is ""), so several transports (one per downstream) in one
// process can be told apart and read beside their ObserveTransport gauges:
// give both the same name.
//
//	tr := transport.New(base, transport.WithHooks(tel.NamedHooks("payments")))
//	reg, err := tel.ObserveTransport("payments", tr)
func (t *Telemetry) NamedHooks(name string) resilience.Hooks { return t.hooks(name, t.cfg.otelhttp) }

// HooksFor returns Hooks for a transport over base (transport.New(base,
// transport.WithHooks(tel.HooksFor(base)))). When base is, or wraps through
// Unwrap() http.RoundTripper methods, an *otelhttp.Transport, otelhttp makes
// each attempt's CLIENT span, so gotry makes none, as with
// WithOtelhttpAttempts: one CLIENT span per attempt whichever option was
// forgotten. Place AttemptAnnotator inside otelhttp to give those spans
// gotry's attempt attributes. NamedHooksFor adds gotry.transport.
func (t *Telemetry) HooksFor(base http.RoundTripper) resilience.Hooks {
	return t.NamedHooksFor("", base)
}

// NamedHooksFor is HooksFor whose metrics carry gotry.transport=name.
func (t *Telemetry) NamedHooksFor(name string, base http.RoundTripper) resilience.Hooks {
	return t.hooks(name, t.cfg.otelhttp || wrapsOtelhttp(base))
}

// hooks returns the hooks; name goes on every metric, otelhttpAttempts says
// otelhttp makes the attempt spans.
func (t *Telemetry) hooks(name string, otelhttpAttempts bool) resilience.Hooks {
	hs := &hookSet{t: t, name: name, otelhttp: otelhttpAttempts}
	return resilience.Hooks{
		OnCallStart: func(ctx context.Context, e resilience.CallStartEvent) context.Context {
			c := hs.newCall(e.Event)
			ctx = c.startCall(ctx, transport.RequestOf(e.Event), e.Start)
			return c.ctx.carry(ctx, callKey{t}, c)
		},
		OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
			return hs.attemptStart(ctx, e)
		},
		OnAttemptEnd: func(e resilience.AttemptEndEvent) {
			a := hs.attemptFor(e)
			// The response is the transport's to close; telemetry reads its
			// Proto only.
			a.end(e.Context, e.Code, e.Err, e.Duration, e.Outcome, transport.ResponseOf(e)) //nolint:bodyclose // not ours to close
		},
		OnRetry: func(e resilience.RetryEvent) {
			c := hs.callFor(e.Event)
			c.superseded(e.Attempt)
			c.retry(e.Context, e.Attempt, e.Delay, e.FromRetryAfter, e.Code, e.Err)
		},
		OnBackoff: func(e resilience.BackoffEvent) {
			hs.callFor(e.Event).backoffSpan(e.Context, e.Start, e.Delay, e.Slept, e.FromRetryAfter, e.Interrupted)
		},
		OnHedge: func(e resilience.HedgeEvent) {
			hs.callFor(e.Event).hedge(e.Context, e.Attempt, e.InFlight, e.Delay, e.Adaptive)
		},
		OnBudgetExhausted: func(e resilience.BudgetEvent) {
			hs.callFor(e.Event).budgetExhausted(e.Context, e.Attempt, e.Kind)
		},
		OnBreakerReject: func(e resilience.BreakerRejectEvent) {
			hs.callFor(e.Event).breakerReject(e.Context, e.Attempt, e.State)
		},
		OnBreakerStateChange: func(e resilience.BreakerStateEvent) {
			hs.callFor(e.Event).breakerChange(e.Context, e.Key, e.From, e.To)
		},
		OnCallEnd: func(e resilience.CallEndEvent) {
			hs.callFor(e.Event).end(e.Context, callEnd{start: e.Start, dur: e.Duration,
				backoff: e.Backoff, attempts: e.Attempts, retries: e.Retries, hedges: e.Hedges,
				code: e.Code, err: e.Err, reason: e.Reason, returned: e.Returned})
		},
		OnResultDone: func(e resilience.ResultDoneEvent) {
			if a := t.attemptFrom(e.Context); a != nil {
				a.bodyDone(e.Err)
			}
		},
	}
}

// attemptStart makes the attempt's telemetry: its span (unless otelhttp
// makes it), with its context injected into header when there is one.
func (hs *hookSet) attemptStart(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
	a := hs.callFor(e.Event).newAttempt(e.Attempt, e.Kind, e.Probe)
	a.inFlight.Store(a.c.attemptStarted())
	if !a.c.http() || !hs.otelhttp {
		ctx = a.startSpan(ctx, transport.HeaderOf(e))
	}
	return a.ctx.carry(ctx, attemptKey{hs.t}, a)
}

// end handles an attempt's result. An HTTP call returns responses whose
// body ends the span.
func (a *attempt) end(ctx context.Context, code int, err error, dur time.Duration, o resilience.AttemptOutcome, resp *http.Response) {
	if cell := a.inFlight.Swap(nil); cell != nil {
		a.c.attemptEnded(cell)
	}
	a.record(ctx, code, err, dur, o)
	a.spanResult(code, err, dur, o, resp)
	a.log(ctx, code, err, dur, o)
	a.settleSpan(a.c.http(), err, o)
}

func (c *call) retry(ctx context.Context, n int, delay time.Duration, retryAfter bool, code int, err error) {
	trigger := retryTrigger(code, err)
	source := delaySource(delay.Seconds(), retryAfter)
	c.recordRetry(ctx, trigger, source, delay)
	c.event(eventRetry, KeyAttempt.Int(n), KeyRetryTrigger.String(trigger),
		KeyDelaySource.String(source), KeyBackoffDelay.Float64(delay.Seconds()))
	c.logRetry(ctx, n, delay, trigger, source, code, err)
}

func (c *call) hedge(ctx context.Context, n, inFlight int, delay time.Duration, adaptive bool) {
	trigger := hedgeTrigger(adaptive)
	c.recordHedge(ctx, trigger)
	c.event(eventHedge, KeyAttempt.Int(n), KeyHedgeInFlight.Int(inFlight),
		KeyHedgeDelay.Float64(delay.Seconds()), KeyHedgeTrigger.String(trigger))
	c.logHedge(ctx, n, inFlight)
}

// hedgeTrigger names what set a hedge's delay, as KeyHedgeTrigger says.
func hedgeTrigger(adaptive bool) string {
	if adaptive {
		return "adaptive"
	}
	return "fixed"
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

// breakerChange records a transition of key's breaker, seen during call c.
func (c *call) breakerChange(ctx context.Context, key string, from, to resilience.BreakerState) {
	c.recordTransition(ctx, key, from, to)
	c.breakerMoved(key, from, to)
	c.logTransition(ctx, key, from, to)
}

func (c *call) end(ctx context.Context, e callEnd) {
	c.recordEnd(ctx, e)
	c.logEnd(ctx, e)
	c.endCall(e)
}
