package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Transport returns the option that gives a transport.Transport its spans,
// metrics, logs and gauges, in one step:
//
//	tel := telemetry.New(telemetry.WithLogger(zapLogger))
//	tr := transport.New(base, tel.Transport(telemetry.Name("payments")), transport.WithHedging(50*time.Millisecond, 1))
//
// It composes with any other transport option, WithHooks included. Each
// transport it is given to gets hook state of its own (the log rate
// limiters) and is added to the gauges (see Gauges in the package doc),
// which keep reporting it for as long as the program holds it.
//
// One CLIENT span per attempt, whatever the layout. When the transport's
// base is, or wraps through Unwrap() http.RoundTripper methods, an
// *otelhttp.Transport, otelhttp makes each attempt's CLIENT span and
// injects its headers, so gotry makes no attempt span and records no
// http.client.request.duration; the same holds over another transport this
// Telemetry instruments, whose own attempts are the physical ones. A
// RoundTripper without an Unwrap method (most logging and auth
// middlewares) hides what is below it when the transport is built; gotry
// then finds otelhttp (or an instrumented transport) at run time, from the
// first attempt that gets a response: the request that reached the network
// comes back as resp.Request (http.Transport sets it), and when its
// context holds a CLIENT span of the attempt's trace other than gotry's
// (unsampled: when its traceparent is not the one gotry injected), the
// attempt was traced below. From then on the transport makes no attempt
// spans and records no http.client.request.duration, and MsgSpansBelow is
// logged once (to otel.Handle without a logger). The attempts sent before
// (the first, and those in flight with it) keep two CLIENT spans each: give
// the middleware an Unwrap method so gotry sees otelhttp at once. A
// transport given this option twice is wired once, by the first; given it
// twice with different names (Name), transport.New panics naming the
// option and both names, since the metrics can carry only one. (Two
// different Telemetry values on one transport each make their own spans,
// as they would for two tracer providers: give a transport one Telemetry
// per provider.) gotry gives otelhttp's span the attempt's attributes and
// outcome when a response arrives (found through resp.Request, which
// http.Transport sets); AttemptAnnotator inside otelhttp gives them from
// the attempt's start, on errors too, and marks a hedge loser's span
// cancelled rather than failed:
//
//	tr := transport.New(otelhttp.NewTransport(tel.AttemptAnnotator(base)), tel.Transport())
//
// Every hook is set, so every response body the transport returns is
// wrapped (the winning attempt's span ends when it is closed or read to
// EOF).
func (t *Telemetry) Transport(opts ...HooksOption) transport.Option {
	hc := newHooksConfig(opts)
	return transport.WithHooksFor(func(tr *transport.Transport) transport.Hooks {
		if name, ok := t.wiredAs(tr); ok {
			sameName("Transport", name, hc.name)
			return transport.Hooks{} // given twice, alike: the first one wires it
		}
		below := t.spansBelow(tr.Unwrap())
		t.observe(gaugeSource{name: hc.name, get: weakly(tr)})
		return t.hooks(hc.name, below)
	})
}

// Retrier returns the option that gives a resilience.Retrier its spans,
// metrics, logs and gauges, as Transport does for a transport:
//
//	r := resilience.NewRetrier(tel.Retrier(telemetry.Name("jobs")), resilience.WithMaxAttempts(5))
//
// Its calls get gotry.operation (the call's key) in place of the HTTP
// attributes, and INTERNAL attempt spans; its breakers' gauges are
// labelled gotry.operation too.
func (t *Telemetry) Retrier(opts ...HooksOption) resilience.Option {
	hc := newHooksConfig(opts)
	return resilience.WithHooksFor(func(r *resilience.Retrier) resilience.Hooks {
		if name, ok := t.wiredAs(r); ok {
			sameName("Retrier", name, hc.name)
			return resilience.Hooks{} // given twice, alike: the first one wires it
		}
		t.observe(gaugeSource{name: hc.name, op: true, get: weakly(r)})
		return t.hooks(hc.name, false)
	})
}

// Engine returns the hooks maker that gives a resilience.Engine its
// spans, metrics, logs and gauges, as Retrier does for a Retrier (an
// engine's keys are operations too):
//
//	e := resilience.NewEngine(resilience.Settings{}, tel.Engine(telemetry.Name("ledger")))
func (t *Telemetry) Engine(opts ...HooksOption) func(*resilience.Engine) resilience.Hooks {
	hc := newHooksConfig(opts)
	return func(e *resilience.Engine) resilience.Hooks {
		if name, ok := t.wiredAs(e); ok {
			sameName("Engine", name, hc.name)
			return resilience.Hooks{} // given twice, alike: the first one wires it
		}
		t.observe(gaugeSource{name: hc.name, op: true, get: weakly(e)})
		return t.hooks(hc.name, false)
	}
}

// HooksOption configures what Telemetry.Transport, Telemetry.Retrier and
// Telemetry.Engine wire. A nil HooksOption changes nothing.
type HooksOption interface{ applyHooks(*hooksConfig) }

type hooksOptionFunc func(*hooksConfig)

func (f hooksOptionFunc) applyHooks(c *hooksConfig) { f(c) }

// hooksConfig is what the HooksOptions of one Transport or Retrier call set.
type hooksConfig struct {
	name string // gotry.transport; "" for none
}

func newHooksConfig(opts []HooksOption) hooksConfig {
	var c hooksConfig
	for _, o := range opts {
		if o != nil {
			o.applyHooks(&c)
		}
	}
	return c
}

// Name puts gotry.transport=name on every metric of the transport or
// retrier, its gauges included, so that several of them (one per
// downstream) in one process can be told apart (default none; "" is
// none). One transport or retrier has one name: wiring it twice with two
// different names panics at construction (see Telemetry.Transport).
func Name(name string) HooksOption {
	return hooksOptionFunc(func(c *hooksConfig) { c.name = name })
}

// sameName panics when a transport or retrier (what: the method that wires
// it) already wired as first is given the option again with another name:
// its metrics would carry the first name without a word, and the second
// wiring's dashboards would show nothing. The same name twice is harmless.
func sameName(what, first, second string) {
	if first != second {
		panic(fmt.Sprintf("telemetry: Name: Telemetry.%s given twice to one %s with different names, %q and then %q; its metrics can carry only one: give the option once, or the same Name",
			what, strings.ToLower(what), first, second))
	}
}

// hooks returns the hooks; name goes on every metric, below says something
// under the transport makes the attempt spans (see spansBelow).
func (t *Telemetry) hooks(name string, below bool) resilience.Hooks {
	hs := &hookSet{t: t, name: name}
	hs.below.Store(below)
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
			a.end(e.Context, e.Code, e.Err, e.Duration, e.Outcome, e.Pushback, transport.ResponseOf(e)) //nolint:bodyclose // not ours to close
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
		OnShed: func(e resilience.ShedEvent) {
			hs.callFor(e.Event).shed(e.Context, e)
		},
		OnLimitWait: func(e resilience.LimitWaitEvent) {
			hs.callFor(e.Event).limitWait(e)
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
	if !a.c.http() || !hs.below.Load() {
		ctx = a.startSpan(ctx, transport.HeaderOf(e))
	}
	return a.ctx.carry(ctx, attemptKey{hs.t}, a)
}

// end handles an attempt's result (pushback: its answer's pushback was
// honoured). An HTTP call returns responses whose body ends the span.
func (a *attempt) end(ctx context.Context, code int, err error, dur time.Duration, o resilience.AttemptOutcome, pushback bool, resp *http.Response) {
	if cell := a.inFlight.Swap(nil); cell != nil {
		a.c.attemptEnded(cell)
	}
	if resp != nil && a.tracedBelow(resp.Request) {
		a.c.hs.foundBelow(ctx, a.c)
	}
	a.record(ctx, code, err, dur, o)
	a.spanResult(code, err, dur, o, pushback, resp)
	a.log(ctx, code, err, dur, o, pushback)
	a.settleSpan(a.c.http(), err, o)
}

func (c *call) retry(ctx context.Context, n int, delay time.Duration, retryAfter bool, code int, err error) {
	trigger := retryTrigger(code, err)
	source := delaySource(delay.Seconds(), retryAfter)
	c.recordRetry(ctx, trigger, source, delay)
	c.event(EventRetry, keyAttempt.Int(n), KeyRetryTrigger.String(trigger),
		KeyDelaySource.String(source), keyBackoffDelay.Float64(delay.Seconds()))
	c.logRetry(ctx, n, delay, trigger, source, code, err)
}

func (c *call) hedge(ctx context.Context, n, inFlight int, delay time.Duration, adaptive bool) {
	trigger := hedgeTrigger(adaptive)
	c.recordHedge(ctx, trigger)
	c.event(EventHedge, keyAttempt.Int(n), keyHedgeInFlight.Int(inFlight),
		keyHedgeDelay.Float64(delay.Seconds()), KeyHedgeTrigger.String(trigger))
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
	c.event(EventBudgetExhausted, keyAttempt.Int(n), KeyAttemptKind.String(k.String()))
	c.logBudget(ctx, n, k)
}

// shed records an attempt the concurrency limit refused: counted in
// gotry.limit.shed, an event on the request span, an aggregated log line.
// A shed initial attempt also ends the request as "overloaded", which
// OnCallEnd records as every give-up.
func (c *call) shed(ctx context.Context, e resilience.ShedEvent) {
	c.recordShed(ctx, e.Kind, e.Criticality)
	c.event(EventLimitShed, keyAttempt.Int(e.Attempt), KeyAttemptKind.String(e.Kind.String()),
		KeyCriticality.String(e.Criticality.String()), KeyLimitCurrent.Int(e.Limit),
		KeyLimitInFlight.Int(e.InFlight), KeyLimitWaited.Float64(e.Waited.Seconds()))
	c.logShed(ctx, e)
}

// limitWait records that the request's first attempt waited for a permit
// of the concurrency limit and got one: an event on the request span (the
// wait shows in the request's duration and in the gap before its first
// attempt span).
func (c *call) limitWait(e resilience.LimitWaitEvent) {
	c.event(EventLimitWait, KeyCriticality.String(e.Criticality.String()), KeyLimitCurrent.Int(e.Limit),
		KeyLimitInFlight.Int(e.InFlight), KeyLimitWaited.Float64(e.Waited.Seconds()))
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
