package telemetry

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/resilience"
)

// Span names. The request span is INTERNAL and named "gotry {method}"
// (e.g. "gotry GET"; "gotry HTTP" for a method the conventions do not
// know); each physical attempt is a CLIENT span named "{method}", as the
// HTTP client conventions name it. A generic call is "gotry {key}" with
// INTERNAL attempts "gotry {key} attempt". Every name is low-cardinality:
// never a path.
const (
	// BackoffSpanName names the INTERNAL span of one backoff sleep.
	BackoffSpanName = "gotry backoff"
)

// Span event names, on the request span. OpenTelemetry has no convention
// for them, so they are invented and start with "gotry.". Two share their
// string with a metric's name (gotry.limit.shed with MetricLimitShed): an
// event name and a metric name are distinct constants, to be used each
// where it belongs.
const (
	// EventRetry is a scheduled retry: gotry.attempt (the attempt that
	// failed), gotry.retry.trigger, gotry.retry.delay_source and
	// gotry.backoff.delay.
	EventRetry = "gotry.retry"
	// EventHedge is a hedge launch: gotry.attempt (the hedge's number),
	// gotry.hedge.in_flight, gotry.hedge.delay and gotry.hedge.trigger.
	EventHedge = "gotry.hedge"
	// EventBudgetExhausted is a retry or hedge the retry budget refused:
	// gotry.attempt and gotry.attempt.kind.
	EventBudgetExhausted = "gotry.budget.exhausted"
	// EventBreakerReject is an attempt after the first that a breaker
	// refused: gotry.attempt and gotry.breaker.state. (A rejection at
	// admission is error.type circuit_open on the request span instead.)
	EventBreakerReject = "gotry.breaker.reject"
	// EventBreakerStateChange is a transition of a breaker the request
	// moved: gotry.breaker.from, gotry.breaker.to and the host
	// (server.address, server.port) or gotry.operation.
	EventBreakerStateChange = "gotry.breaker.state_change"
	// EventLimitShed is an attempt the concurrency limit refused:
	// gotry.attempt, gotry.attempt.kind, gotry.criticality,
	// gotry.limit.current, gotry.limit.in_flight and gotry.limit.waited.
	EventLimitShed = "gotry.limit.shed"
	// EventLimitWait is a first attempt that waited for its permit and got
	// one: gotry.criticality, gotry.limit.current, gotry.limit.in_flight
	// and gotry.limit.waited.
	EventLimitWait = "gotry.limit.wait"
)

// spanIdentity appends the call's identity to kv: method, server and port
// for HTTP, gotry.operation otherwise.
func (c *call) spanIdentity(kv []attribute.KeyValue) []attribute.KeyValue {
	if c.method == "" {
		return append(kv, KeyOperation.String(c.op))
	}
	kv = append(kv, keyMethod.String(c.method))
	if c.methodOrig != "" {
		kv = append(kv, keyMethodOriginal.String(c.methodOrig))
	}
	kv = append(kv, keyServerAddress.String(c.host))
	if c.port > 0 {
		kv = append(kv, keyServerPort.Int(c.port))
	}
	return kv
}

// startCall opens the request span, a child of whatever span ctx holds.
// Its attributes are all set at its end (endCall), in one SetAttributes
// of exactly their number: given at the start they cost the SDK two more
// copies. Unlike the attempt spans, which are the HTTP client spans and
// carry the conventions' sampling attributes from their start, this span
// is gotry's own and INTERNAL; a sampler sees its name ("gotry GET").
// With the wall clock the span takes the SDK's own readings for its start
// and end, which follow the engine's (start, and start plus the call's
// duration) by the few instructions between them and the hook; an
// injected clock's times are given explicitly, at two allocations each.
func (c *call) startCall(ctx context.Context, req *http.Request, start time.Time) context.Context {
	t := c.hs.t
	opts := t.internalOpts
	if t.stamp {
		opts = append(opts[:1:1], trace.WithTimestamp(start))
	}
	ctx, c.span = t.tracer.Start(ctx, c.spanName, opts...)
	if c.span.IsRecording() && req != nil {
		c.url = fullURL(req.URL, t.cfg.dropQuery)
	}
	// For the span and gotry.request.time_left, sampled or not.
	if dl, ok := ctx.Deadline(); ok && !start.IsZero() {
		c.timeLeft = max(dl.Sub(start), time.Nanosecond) // a deadline already past shows as (almost) none left
	}
	return ctx
}

// startSpan opens a's span as a child of the request span in ctx and
// writes its context into header (HTTP only). Its attributes are given at
// the start, where a sampler sees them.
func (a *attempt) startSpan(ctx context.Context, header http.Header) context.Context {
	c := a.c
	t := c.hs.t
	kind := t.internalOpts[0]
	if c.method != "" {
		kind = t.client
	}
	sc := t.scratch()
	kv := c.spanIdentity(sc.kv[:0])
	if c.url != "" {
		kv = append(kv, keyURLFull.String(c.url))
	}
	sc.opts[0], sc.opts[1] = kind, trace.WithAttributes(a.attrs(kv)...)
	opts := sc.opts[:2]
	if t.stamp {
		opts = append(opts, trace.WithTimestamp(t.cfg.clock.Now()))
	}
	ctx, a.span = t.tracer.Start(ctx, c.attemptName, opts...)
	t.release(sc, len(kv))
	if header != nil {
		a.carrier.h = header
		t.prop.Inject(ctx, &a.carrier)
	}
	return ctx
}

// scratch is a buffer for the attributes and options of one call into
// the SDK, lent by Telemetry.scratch. Passed through the Tracer and Span
// interfaces, a buffer on the stack escapes to the heap at every use; kept
// in each call and attempt it made a request's allocation 1.2 KB larger.
// The SDK copies what it keeps, so a buffer is free again once the call
// returns.
type scratch struct {
	kv   [12]attribute.KeyValue // the most a span is given at once: the request span's end
	opts [3]trace.SpanStartOption
}

// scratch lends a buffer; release returns it.
func (t *Telemetry) scratch() *scratch {
	if sc, ok := t.scratches.Get().(*scratch); ok {
		return sc
	}
	return new(scratch)
}

// release returns sc, its first n attributes cleared so that the pool
// holds no strings of a finished request.
func (t *Telemetry) release(sc *scratch, n int) {
	clear(sc.kv[:n])
	sc.opts = [3]trace.SpanStartOption{}
	t.scratches.Put(sc)
}

// attrs appends the attempt's own attributes: resend count and kind, probe.
// On an HTTP attempt both the resend count (as the conventions say) and the
// kind are set only for a resend (a retry or a hedge): an attempt span
// without them is the request's first. That keeps a successful first
// attempt's span at 8 attributes; at 9 or more, the SDK deduplicates a
// span's attributes for its span processors in a map on the heap (three
// allocations and ≈ 1 µs a span, measured with a batch processor). A
// generic call's attempt, with fewer attributes, always carries its kind.
func (a *attempt) attrs(kv []attribute.KeyValue) []attribute.KeyValue {
	if a.c.method == "" {
		kv = append(kv, KeyAttemptKind.String(a.kind.String()))
	} else if a.num > 1 {
		kv = append(kv, keyResendCount.Int(a.num-1), KeyAttemptKind.String(a.kind.String()))
	}
	if a.probe {
		kv = append(kv, KeyAttemptProbe.Bool(true))
	}
	return kv
}

// findOuter finds, for an attempt whose span otelhttp made without
// AttemptAnnotator inside it, otelhttp's span through the response: the
// request the base answered (resp.Request, which http.Transport sets) is
// otelhttp's copy, whose context holds its span, under this attempt's. It
// gives that span the attempt's attributes, as the annotator would have,
// and keeps it in a.outer for the result. It finds nothing without a
// response, or when the span there is not one between this attempt and the
// base (another transport's attempt, or none at all).
func (a *attempt) findOuter(resp *http.Response) {
	if resp == nil || resp.Request == nil {
		return
	}
	ctx := resp.Request.Context()
	if a.c.hs.t.attemptFrom(ctx) != a {
		return // not this attempt's request: a transport below made it
	}
	s := trace.SpanFromContext(ctx)
	if !s.IsRecording() || s.SpanContext().SpanID() == a.c.span.SpanContext().SpanID() {
		return
	}
	var buf [3]attribute.KeyValue
	s.SetAttributes(a.attrs(buf[:0])...)
	a.outer = s
}

// spanResult records an attempt's result on its span: outcome, status,
// time to the response headers and protocol version when there is a
// response (resp), error.type, and gotry.attempt.pushback when its answer's
// pushback was honoured. A cancelled attempt (a hedge loser, or the caller
// gave up) is not an error: no error.type, no status. In otelhttp mode only
// the outcome, time to headers and pushback are added to otelhttp's span,
// and only while it still records (it ends at once on a transport error).
func (a *attempt) spanResult(code int, err error, dur time.Duration, o resilience.AttemptOutcome, pushback bool, resp *http.Response) {
	if a.span == nil {
		if a.outer == nil {
			a.findOuter(resp)
		}
		if a.outer != nil && a.outer.IsRecording() {
			a.outer.SetAttributes(KeyAttemptOutcome.String(o.String()))
			if resp != nil {
				a.outer.SetAttributes(keyAttemptTimeToHeaders.Float64(dur.Seconds()))
			}
			if pushback {
				a.outer.SetAttributes(KeyAttemptPushback.Bool(true))
			}
		}
		return
	}
	s := a.span
	if !s.IsRecording() {
		return
	}
	sc := a.c.hs.t.scratch()
	kv := append(sc.kv[:0], KeyAttemptOutcome.String(o.String()))
	if code > 0 {
		kv = append(kv, keyStatusCode.Int(code))
	}
	if resp != nil {
		kv = append(kv, keyAttemptTimeToHeaders.Float64(dur.Seconds()))
		if v := protocolVersion(resp); v != "" {
			kv = append(kv, keyProtocolVersion.String(v))
		}
	}
	if pushback {
		kv = append(kv, KeyAttemptPushback.Bool(true))
	}
	if o != resilience.AttemptCancelled {
		if et := resultErrorType(code, err); et != "" {
			kv = append(kv, KeyErrorType.String(et))
			if err != nil {
				s.SetStatus(codes.Error, errorMessage(err))
			} else {
				s.SetStatus(codes.Error, "")
			}
		}
	}
	s.SetAttributes(kv...)
	a.c.hs.t.release(sc, len(kv))
}

// endSpan ends a's span once, stamped by the telemetry's clock.
func (a *attempt) endSpan() {
	if a.span != nil && a.ended.CompareAndSwap(false, true) {
		if t := a.c.hs.t; t.stamp {
			a.span.End(trace.WithTimestamp(t.cfg.clock.Now()))
		} else {
			a.span.End()
		}
	}
}

// superseded ends the span of attempt n when it is the retained one: the
// engine fires OnRetry after the transport read its retryable response into
// memory and closed it (Operation.Retain), so the attempt is over even if
// that copy is returned on a later give-up; its span ends before the
// backoff that follows.
func (c *call) superseded(n int) {
	c.mu.Lock()
	r := c.retained
	if r != nil && r.num == n {
		c.retained = nil
	} else {
		r = nil
	}
	c.mu.Unlock()
	if r != nil {
		r.endSpan()
	}
}

// settleSpan decides when a's span ends after its result. For the transport
// the span of an attempt whose response may be returned (a success, or the
// latest retryable response, which is returned on give-up) stays open until
// the body is finished or the request ends without it; any other ends now.
func (a *attempt) settleSpan(hasBody bool, err error, o resilience.AttemptOutcome) {
	if a.span == nil {
		return
	}
	c := a.c
	if !hasBody || err != nil || (o != resilience.AttemptSuccess && o != resilience.AttemptRetryable) {
		a.endSpan()
		return
	}
	var superseded *attempt
	c.mu.Lock()
	if o == resilience.AttemptSuccess {
		c.winner = a
	} else {
		superseded, c.retained = c.retained, a
	}
	c.mu.Unlock()
	if superseded != nil {
		superseded.endSpan() // the transport just released its response
	}
}

// endCall records the request's result on its span and ends it, and ends
// the kept attempt spans whose response is not the one returned.
func (c *call) endCall(e callEnd) {
	c.mu.Lock()
	w, r := c.winner, c.retained
	c.mu.Unlock()
	// Only the returned attempt's span waits for its body.
	for _, x := range [2]*attempt{w, r} {
		if x != nil && x.num != e.returned {
			x.endSpan()
		}
	}

	s := c.span
	if !s.IsRecording() {
		return
	}
	sc := c.hs.t.scratch()
	// The retries, hedges and seconds of backoff are set only when not
	// zero, as the conventions set http.request.resend_count only on a
	// resend: a request that succeeded at once has 6 attributes, within
	// the SDK's 8 (see attempt.attrs).
	kv := append(c.spanIdentity(sc.kv[:0]), KeyAttempts.Int(e.attempts), KeyReason.String(e.reason.String()))
	if e.retries > 0 {
		kv = append(kv, KeyRetries.Int(e.retries))
	}
	if e.hedges > 0 {
		kv = append(kv, KeyHedges.Int(e.hedges))
	}
	if e.backoff > 0 {
		kv = append(kv, keyBackoffTotal.Float64(e.backoff.Seconds()))
	}
	if e.code > 0 {
		kv = append(kv, keyStatusCode.Int(e.code))
	}
	if c.timeLeft > 0 {
		kv = append(kv, keyTimeLeft.Float64(c.timeLeft.Seconds()))
	}
	if et := resultErrorType(e.code, e.err); et != "" {
		kv = append(kv, KeyErrorType.String(et))
		if e.err != nil {
			s.SetStatus(codes.Error, errorMessage(e.err))
		} else {
			s.SetStatus(codes.Error, "")
		}
	}
	s.SetAttributes(kv...)
	c.hs.t.release(sc, len(kv))
	if c.hs.t.stamp {
		s.End(trace.WithTimestamp(e.start.Add(e.dur)))
		return
	}
	s.End()
}

// bodyDone ends the returned attempt's span when its response body is
// closed or read to EOF; err is a read error that ended the body early.
func (a *attempt) bodyDone(err error) {
	if a.span == nil {
		return
	}
	if err != nil && a.span.IsRecording() {
		a.span.RecordError(err)
		a.span.SetAttributes(KeyErrorType.String(ErrorType(err)))
		a.span.SetStatus(codes.Error, errorMessage(err))
	}
	a.endSpan()
	// Whatever else was kept open is not being read.
	c := a.c
	c.mu.Lock()
	w, r := c.winner, c.retained
	c.mu.Unlock()
	for _, x := range [2]*attempt{w, r} {
		if x != nil && x != a {
			x.endSpan()
		}
	}
}

// backoffSpan records one finished sleep as a span of its own, from its
// start to start+slept, under the request span.
func (c *call) backoffSpan(ctx context.Context, start time.Time, delay, slept time.Duration, retryAfter, interrupted bool) {
	if !c.span.IsRecording() {
		return
	}
	_, s := c.hs.t.tracer.Start(ctx, BackoffSpanName, c.hs.t.internalOpts[0],
		trace.WithTimestamp(start), trace.WithAttributes(
			keyBackoffDelay.Float64(delay.Seconds()),
			KeyBackoffRetryAfter.Bool(retryAfter),
			KeyBackoffInterrupted.Bool(interrupted),
		))
	s.End(trace.WithTimestamp(start.Add(slept)))
}

// event adds a span event to the request span.
func (c *call) event(name string, kv ...attribute.KeyValue) {
	if c.span.IsRecording() {
		c.span.AddEvent(name, trace.WithAttributes(kv...))
	}
}

// breakerMoved adds a transition of key's breaker, which c's admission or
// attempt caused, as an event on c's request span: from, to, and the host
// (server.address and server.port) or, for a generic call, the operation.
func (c *call) breakerMoved(key string, from, to resilience.BreakerState) {
	if !c.span.IsRecording() {
		return
	}
	var buf [4]attribute.KeyValue
	kv := append(buf[:0], KeyBreakerFrom.String(breakerState(from)), KeyBreakerTo.String(breakerState(to)))
	if c.http() {
		host, port := splitKey(key)
		kv = append(kv, keyServerAddress.String(host))
		if port > 0 {
			kv = append(kv, keyServerPort.Int(port))
		}
	} else {
		kv = append(kv, KeyOperation.String(key))
	}
	c.span.AddEvent(EventBreakerStateChange, trace.WithAttributes(kv...))
}

// breakerRejected marks a rejection: at admission (attempt 0) the request
// span gets error.type circuit_open and the breaker's state; a later
// attempt's rejection is an event.
func (c *call) breakerRejected(n int, s resilience.BreakerState) {
	if !c.span.IsRecording() {
		return
	}
	if n == 0 {
		c.span.SetAttributes(KeyErrorType.String(ErrorTypeCircuitOpen), KeyBreakerState.String(breakerState(s)))
		return
	}
	c.span.AddEvent(EventBreakerReject, trace.WithAttributes(keyAttempt.Int(n), KeyBreakerState.String(breakerState(s))))
}

// callEnd is the end of a request or generic call, whichever hook saw it.
type callEnd struct {
	start                     time.Time
	dur, backoff              time.Duration
	attempts, retries, hedges int
	code                      int
	err                       error
	reason                    resilience.EndReason
	returned                  int // the attempt whose result was returned, 0 if none
}
