package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// Transport is a retrying, hedging, circuit-breaking http.RoundTripper. Build
// it with New; it is safe for concurrent use.
type Transport struct {
	base   http.RoundTripper
	cfg    config
	engine *resilience.Engine
	policy resilience.Policy // the transport's own settings as an engine Policy, built once
	keyed  bool              // the engine uses each call's key (see resilience.Engine.Keyed)
	calls  sync.Pool         // *call of finished requests that were not hedged, for reuse
}

var _ http.RoundTripper = (*Transport)(nil)

// New wraps base (http.DefaultTransport when nil). With no options the
// transport retries idempotent requests up to 3 attempts with full-jitter
// backoff, under a budget of 10% of requests plus 10 retries per second; the
// breaker and hedging are off. New never panics and ignores nil options; an
// option constructor panics, naming itself and the value, when given
// nonsense (see Option).
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	ec := resilience.EngineConfig{
		BudgetRatio:     cfg.budgetRatio,
		BudgetMinPerSec: cfg.budgetMinPerSec,
		Breaker:         cfg.breaker,
		Hooks:           cfg.hooks,
		Clock:           cfg.clock,
		Adaptive:        cfg.adaptive,
		Limit:           cfg.limit,
		MaxKeys:         cfg.maxHosts,
	}
	t := &Transport{base: base, cfg: cfg, engine: resilience.NewEngine(ec)}
	t.policy = resilience.Policy{
		MaxAttempts:       cfg.maxAttempts,
		MaxHedges:         cfg.maxHedges,
		HedgeDelay:        cfg.hedgeDelay,
		Adaptive:          cfg.adaptive != nil,
		Backoff:           cfg.backoff,
		PerAttemptTimeout: cfg.perAttemptTimeout,
		MaxRetryAfter:     cfg.maxRetryAfter,
	}
	t.keyed = t.engine.Keyed()
	return t
}

// BudgetTokens returns how many retries or hedges the budget would allow
// right now (+Inf when the budget is disabled). For gauges.
func (t *Transport) BudgetTokens() float64 { return t.engine.BudgetTokens() }

// BreakerState returns host's breaker state (closed when the breaker is off
// or the host is not tracked).
func (t *Transport) BreakerState(host string) resilience.BreakerState {
	return t.engine.BreakerState(host)
}

// EachHedgeDelay calls fn for every host that adaptive hedging tracks
// (WithAdaptiveHedging) with its current hedge delay, and whether the host
// has enough recent results for the delay to be learned (warm) rather than
// the cold default. fn runs with no lock held. For gauges; does nothing
// without adaptive hedging.
func (t *Transport) EachHedgeDelay(fn func(host string, delay time.Duration, warm bool)) {
	t.engine.EachHedgeDelay(fn)
}

// MaxExtraLoad returns the cap on extra load that WithAdaptiveHedging set
// (the fraction of requests that may get a hedge), or 0 without adaptive
// hedging. For gauges.
func (t *Transport) MaxExtraLoad() float64 { return t.engine.MaxExtraLoad() }

// EachBreaker calls fn for every tracked host with its breaker state. fn runs
// with no lock held. For gauges; does nothing when the breaker is off.
func (t *Transport) EachBreaker(fn func(host string, s resilience.BreakerState)) {
	t.engine.EachBreaker(fn)
}

// EachBreakerFor is EachBreaker that also says how long each host's breaker
// has been in its state. For the "time in state" gauge.
func (t *Transport) EachBreakerFor(fn func(host string, s resilience.BreakerState, in time.Duration)) {
	t.engine.EachBreakerFor(fn)
}

// Unwrap returns the base transport.
func (t *Transport) Unwrap() http.RoundTripper { return t.base }

// RoundTrip sends req, retrying and hedging as configured. It follows the
// http.RoundTripper contract: req is not modified, req.Body is closed on
// every path, and an error is returned only when there is no response.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errNilURL
	}
	c, _ := t.calls.Get().(*call)
	if c == nil {
		c = &call{t: t}
	}
	c.req, c.bodyFresh = req, true // c is clear: see clear
	// An invalid Policy is reported by Prepare, before any attempt, so the
	// request hooks still see the request start and end.
	// Cancelable: a RoundTripper honours its request's context (see the
	// package doc on hedging).
	rc := resilience.Call[*http.Response]{Subject: req, Policy: t.policy, Op: c, Cancelable: true}
	c.cl = t.cfg.classifier
	if rp, ok := PolicyFrom(req.Context()); ok {
		c.policyErr = c.override(&rc.Policy, rp)
	}
	if rc.Policy.MaxHedges > 0 && hasHeader(req.Header, "Upgrade") {
		// A hedged Upgrade could leave a live 101 connection behind as a
		// loser. (A direct map lookup: the key is canonical.)
		rc.Policy.MaxHedges = 0
	}
	if t.keyed { // the breaker's key, and the host in events: only for an engine that uses it
		rc.Key = hostKey(req.URL)
	}
	res := resilience.Execute(req.Context(), t.engine, rc)
	if c.bodyFresh {
		c.closeBody() // no attempt took it: rejected, cancelled early or failed to prepare
	}
	if !res.Detached {
		// Every attempt ran on this goroutine and none holds c.
		c.clear()
		t.calls.Put(c)
	}
	if res.Err != nil {
		return nil, res.Err
	}
	resp := res.Value
	if res.NeedsFinish() {
		track(resp, res.Finisher())
	}
	return resp, nil
}

// call is one RoundTrip: the resilience.Operation the engine drives.
type call struct {
	t               *Transport
	req             *http.Request
	cl              Classifier
	getBody         func() (io.ReadCloser, error) // fresh bodies for replays; nil without a body
	first           io.ReadCloser                 // the body the first attempt sends
	nonIdempotentOK bool                          // the request's Policy allows repeating it
	policyErr       error                         // the request's Policy is invalid; Prepare reports it
	firstIsOriginal bool                          // first is req.Body itself (not a buffer or prefix)
	// bodyFresh reports that req.Body has not been handed to any attempt,
	// so RoundTrip still owns (and must close) it.
	bodyFresh bool
}

// clear drops what c holds of its request, so the pool keeps none of a
// caller's values, and readies it for the next call: every field is zero
// but t, which stays c's transport (calls are pooled per transport).
// Pointers are cleared one by one, and only when set: assigning the struct
// whole would clear every pointer slot under the write barrier while the
// collector marks.
func (c *call) clear() {
	c.req, c.cl = nil, nil
	if c.getBody != nil {
		c.getBody = nil
	}
	if c.first != nil {
		c.first = nil
	}
	if c.policyErr != nil {
		c.policyErr = nil
	}
	c.nonIdempotentOK, c.firstIsOriginal, c.bodyFresh = false, false, false
}

// override applies the request's Policy rp to p, the transport's settings.
func (c *call) override(p *resilience.Policy, rp Policy) error {
	if err := rp.validate(); err != nil {
		return err
	}
	if rp.MaxAttempts > 0 {
		p.MaxAttempts = rp.MaxAttempts
	}
	switch {
	case rp.MaxHedges > 0:
		p.MaxHedges = rp.MaxHedges
	case rp.MaxHedges < 0:
		p.MaxHedges = 0
	}
	if rp.HedgeDelay > 0 {
		p.HedgeDelay = rp.HedgeDelay
	}
	if rp.Backoff != nil {
		p.Backoff = rp.Backoff
	}
	if rp.PerAttemptTimeout > 0 {
		p.PerAttemptTimeout = rp.PerAttemptTimeout
	}
	if rp.Classifier != nil {
		c.cl = rp.Classifier
	}
	if rp.RetryNonIdempotent && !c.idempotent() {
		c.nonIdempotentOK = true
	}
	if rp.Criticality != resilience.CriticalityDefault {
		p.Criticality = rp.Criticality
	}
	if rp.NoLimit {
		p.NoLimit = true
	}
	return nil
}

// idempotent reports whether req may be sent more than once.
func (c *call) idempotent() bool {
	switch c.req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	h := c.req.Header
	return hasHeader(h, "Idempotency-Key") || hasHeader(h, "X-Idempotency-Key")
}

// hasHeader reports whether h has a non-empty value for the canonical key.
func hasHeader(h http.Header, key string) bool {
	v := h[key]
	return len(v) > 0 && v[0] != ""
}

func (c *call) closeBody() {
	if c.bodyFresh && c.req.Body != nil {
		c.bodyFresh = false
		c.req.Body.Close()
	}
}

// Prepare settles eligibility before the body is touched: a request that
// gets one attempt has its body passed through unread.
func (c *call) Prepare(n int) (int, resilience.EndReason, error) {
	if c.policyErr != nil {
		return 0, 0, c.policyErr // RoundTrip closes the body
	}
	// From here the first attempt, which the engine launches as soon as
	// Prepare succeeds, owns req.Body.
	if c.req.Body != nil { // (a pointer store costs a write barrier while the GC runs)
		c.first = c.req.Body
	}
	c.firstIsOriginal = true
	c.bodyFresh = false
	if n <= 1 {
		return 1, resilience.ReasonAttemptsExhausted, nil
	}
	if !c.idempotent() && !c.t.cfg.nonIdempotent && !c.nonIdempotentOK {
		return 1, resilience.ReasonNotIdempotent, nil
	}
	if replayable(c.req) {
		c.getBody = c.req.GetBody
		return n, 0, nil
	}
	limit := c.t.cfg.maxBufferedBody
	if c.req.ContentLength > limit {
		return 1, resilience.ReasonBodyNotReplayable, nil
	}
	getBody, once, err := bufferBody(c.req, limit)
	if err != nil {
		if cerr := c.req.Context().Err(); cerr != nil {
			return 0, 0, cerr // the caller's context ended the reading, as net/http would report it
		}
		return 0, 0, errors.Join(errors.New("transport: reading request body to buffer it"), err)
	}
	c.firstIsOriginal = false
	if once != nil {
		c.first = once
		return 1, resilience.ReasonBodyNotReplayable, nil
	}
	c.getBody = getBody
	c.first, _ = getBody()
	return n, 0, nil
}

// Do sends one attempt.
func (c *call) Do(ctx context.Context, a resilience.AttemptInfo) (*http.Response, error) {
	req := c.req
	body := c.first
	if a.Number > 1 && req.Body != nil && req.Body != http.NoBody {
		b, err := c.getBody()
		if err != nil {
			return nil, errors.Join(errors.New("transport: GetBody failed"), err)
		}
		body = b
	}
	cfg := &c.t.cfg
	hooks := &cfg.hooks
	if a.Number == 1 && !a.Own && c.firstIsOriginal && hooks.OnCallStart == nil && hooks.OnAttemptStart == nil && cfg.attemptHeader == "" {
		// Nothing about this attempt differs from the caller's request (its
		// context, body, GetBody and headers are the caller's own), so the
		// base gets the request as is: it may not modify it either.
		return c.send(req)
	}
	header, _ := a.Carrier.(http.Header) // set when OnAttemptStart is installed: see NewCarrier
	out := req.WithContext(ctx)
	out.Body = body
	if c.getBody != nil {
		out.GetBody = c.getBody
	}
	if cfg.attemptHeader != "" {
		if header == nil {
			header = c.NewCarrier(a).(http.Header)
		}
		header[cfg.attemptHeader] = []string{attemptHeaderValue(a)}
	}
	if header != nil {
		out.Header = header
	}
	return c.send(out)
}

// attemptHeaderValue is WithAttemptHeader's value for a: "2; retry".
func attemptHeaderValue(a resilience.AttemptInfo) string {
	return strconv.Itoa(a.Number) + "; " + a.Kind.String()
}

// NewCarrier gives each attempt a private copy of the request's headers,
// which OnAttemptStart may modify (to inject trace context) and Do sends.
// The engine calls it only when that hook is installed.
func (c *call) NewCarrier(resilience.AttemptInfo) any {
	header := c.req.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	return header
}

// send hands one attempt's request to the base.
func (c *call) send(out *http.Request) (*http.Response, error) {
	resp, err := c.t.base.RoundTrip(out)
	switch {
	case err != nil && resp != nil: // a broken RoundTripper returned both
		closeResponse(resp)
		resp = nil
	case err == nil && resp == nil: // or neither
		err = ErrNilResponse
	}
	return resp, err
}

// Classify applies the classifier and reads Retry-After.
func (c *call) Classify(resp *http.Response, err error, a resilience.AttemptInfo) resilience.Verdict {
	at := Attempt{Request: c.req, Response: resp, Err: err, Number: a.Number}
	d := Default
	if c.cl != nil {
		d = c.cl(at)
	}
	if d == Default {
		d = decide(at, &c.t.cfg.statuses)
	}
	v := resilience.Verdict{Retryable: d == Retry}
	if resp == nil {
		return v
	}
	v.Code = resp.StatusCode
	v.Overload = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	if v.Retryable && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			v.RetryAfter, v.HasRetryAfter = parseRetryAfter(ra, c.t.engine.Now())
		}
	}
	return v
}

// Retain frees the connection of a retryable response that a later attempt
// supersedes: see retainBody.
func (c *call) Retain(ctx context.Context, resp *http.Response) *http.Response {
	if resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = retainBody(ctx, resp.Body, c.t.cfg.maxRetainedBody)
	}
	return resp
}

// Release closes a response that will not be returned. Its attempt is
// already cancelled (the engine cancels first), so nothing is drained.
func (c *call) Release(resp *http.Response) { closeResponse(resp) }
