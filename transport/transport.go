package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	hooks  Hooks             // every WithHooks and WithHooksFor, combined
	policy resilience.Policy // the transport's own settings as an engine Policy, built once
	calls  sync.Pool         // *call of finished requests that were not hedged, for reuse
	// asIs: nothing set for every request changes an attempt's request (no
	// hook that may start a trace or write its headers, no attempt header),
	// so a request none of whose own features does either may go to the
	// base as the caller made it (see call.asIs).
	asIs bool
}

var _ http.RoundTripper = (*Transport)(nil)

// New wraps base (http.DefaultTransport when nil). With no options the
// transport retries idempotent requests up to 3 attempts with full-jitter
// backoff, under the default retry budget (failed retries at most a
// quarter of the requests that succeed, plus a reserve of 2; see
// WithRetryBudget); the breaker, hedging and the concurrency limit are off
// (resilience.DefaultSettings). New never panics and ignores nil options; an
// option constructor panics, naming itself and the value, when given
// nonsense (see Option).
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg := defaultConfig()
	cfg.apply(opts)
	t := &Transport{base: base, cfg: cfg}
	for _, f := range cfg.hooks {
		t.hooks = resilience.Combine(t.hooks, f(t))
	}
	t.cfg.hooks = nil // made once: New's closures need not stay
	t.engine = resilience.NewEngine(cfg.settings, func(*resilience.Engine) Hooks { return t.hooks })
	t.cfg.settings = t.engine.Settings()
	t.policy = t.engine.Policy()
	t.asIs = t.hooks.OnCallStart == nil && t.hooks.OnAttemptStart == nil && cfg.attemptHeader == ""
	return t
}

// Stats returns a snapshot of the transport's retry budget, breakers and
// adaptive hedging state, one entry per tracked host (see
// resilience.Stats). It is what gauges read at each collection, and it
// allocates: keep it off a request's path.
func (t *Transport) Stats() resilience.Stats { return t.engine.Stats() }

// Settings returns the settings shared with resilience's Retrier that the
// transport runs with, every default filled in (a copy: changing it
// changes nothing), for a service that logs its configuration at
// start-up.
func (t *Transport) Settings() resilience.Settings { return t.engine.Settings() }

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
	rc := resilience.Call[*http.Response]{Subject: req, Policy: t.policy, Op: c}
	c.cl, c.headerTimeout = t.cfg.classifier, t.cfg.headerTimeout
	if rp, ok := PolicyFrom(req.Context()); ok {
		c.policyErr = c.override(&rc.Policy, rp)
	}
	if rc.Policy.MaxHedges > 0 && (hasHeader(req.Header, "Upgrade") || !c.mayRepeat()) {
		// A hedged Upgrade could leave a live 101 connection behind as a
		// loser. (A direct map lookup: the key is canonical.) A request
		// that may not be repeated is never hedged; it may be retried only
		// after a refused stream (see Prepare).
		rc.Policy.MaxHedges = resilience.Off
	}
	c.joinHops(&rc.Policy)
	// The request's features are settled (its header timeout is the
	// transport's unless its Policy sets one): whether its first attempt
	// may be the caller's request itself is decided here, once (Prepare
	// may still rule it out: see asIs).
	c.asIs = t.asIs && c.headerTimeout == 0 && !c.peer && !c.strip
	rc.Key = hostKey(req.URL) // the breaker's key, and the host in events
	// c is not touched after this: the engine recycles it (see Recycle)
	// when nothing else can use it, and a late attempt may be using it
	// otherwise.
	hp := c.hop
	res := resilience.Execute(req.Context(), t.engine, rc)
	if res.Err != nil {
		var open *resilience.CircuitOpenError
		if hp != nil && errors.As(res.Err, &open) {
			hp.pushback.Store(true) // known down: the caller's retry would meet the same breaker
		}
		return nil, res.Err
	}
	resp := res.Value
	if end, ok := res.Finisher(); ok {
		track(resp, req.Method, end)
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
	headerTimeout   time.Duration                 // each attempt's header timeout; 0 for none
	// refusedOnly says the request may not be repeated but its body can be
	// replayed: it is retried only after a refused stream (see Prepare).
	refusedOnly bool
	// asIs: the first attempt, when it runs on the caller's context, sends
	// the caller's request itself: neither the transport (Transport.asIs)
	// nor this request (its header timeout, hop headers, a body Prepare
	// buffered) changes anything in it. Set by RoundTrip, cleared by
	// Prepare. A new feature that changes an attempt's request is one more
	// fact in Transport.asIs (set for every request, in New) or in
	// RoundTrip's line (the request's own); Do asks only this bit.
	asIs bool
	hop  *hop // the incoming request's, under Middleware; nil otherwise
	// peer: the host speaks the hop protocol (WithHopPeers): attempts carry
	// its headers and its pushback may be honoured. strip: under
	// Middleware, the request carries the protocol's headers for a host
	// that is no peer, and attempts drop them.
	peer, strip bool
	perAttempt  time.Duration // the per-attempt timeout, for TimeoutHeader (a peer's call only)
	limit       int           // the attempts Prepare allowed
	// bodyFresh reports that req.Body has not been handed to any attempt,
	// so RoundTrip still owns (and must close) it.
	bodyFresh bool
}

// clear drops what c holds of its request, so the pool keeps none of a
// caller's values, and readies it for the next call: every field is zero
// but t, which stays c's transport (calls are pooled per transport).
func (c *call) clear() { *c = call{t: c.t} }

// Recycle readies c for the next request and pools it; the engine calls it
// as Execute returns when no attempt or timer can still use c (a hedge
// fired: a late attempt may; c is then left to the garbage collector). It
// is also where req.Body is closed when no attempt took it (a breaker
// rejection, a cancellation before the first attempt, an invalid Policy):
// such a call launched no attempt, so it is always recycled.
func (c *call) Recycle() {
	c.closeBody()
	c.clear()
	c.t.calls.Put(c)
}

// CancelsPromptly promises the engine that Do returns once its context is
// cancelled, as a RoundTripper honours its request's context, so a hedging
// request runs its attempts on the caller's goroutine until a hedge fires
// (see the package doc on hedging).
func (*call) CancelsPromptly() {}

// override applies the request's Policy rp to p, the transport's settings.
func (c *call) override(p *resilience.Policy, rp Policy) error {
	if err := rp.Validate(); err != nil {
		return err
	}
	if rp.MaxAttempts > 0 {
		p.MaxAttempts = rp.MaxAttempts
	}
	switch {
	case rp.MaxHedges > 0:
		p.MaxHedges = rp.MaxHedges
	case rp.MaxHedges == resilience.Off:
		p.MaxHedges = resilience.Off
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
	if rp.PerAttemptHeaderTimeout > 0 {
		c.headerTimeout = rp.PerAttemptHeaderTimeout
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

// joinHops settles the request's place in a chain of hops (see hop.go):
// the incoming request's hop, under Middleware, and whether its host is a
// peer, whose attempts carry the protocol's headers, or a host that is none
// while the request carries them (copied from the handler's request), whose
// attempts drop them (see WithHopPeers). p is the request's Policy, so far.
func (c *call) joinHops(p *resilience.Policy) {
	if hp := hopFrom(c.req.Context()); hp != nil {
		c.hop = hp
		if hp.above > 0 { // the caller above retries this chain: one attempt here (see Middleware)
			p.MaxAttempts = 1
		}
	}
	if peer := c.t.cfg.hopPeer; peer != nil && peer(hostName(c.req.URL)) {
		c.peer = true
		c.perAttempt = p.PerAttemptTimeout
	} else if c.hop != nil && hasHopHeader(c.req.Header) {
		c.strip = true
	}
}

// mayRepeat reports whether the request may be sent more than once: it is
// idempotent, or the transport or its Policy allows repeating any request.
func (c *call) mayRepeat() bool {
	return c.t.cfg.nonIdempotent || c.nonIdempotentOK || c.idempotent()
}

// idempotent reports whether req may be sent more than once.
func (c *call) idempotent() bool {
	switch c.req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	h := c.req.Header
	return idempotencyKey(h, "Idempotency-Key") || idempotencyKey(h, "X-Idempotency-Key")
}

// idempotencyKey reports whether h marks its request idempotent under the
// canonical key: with a non-empty value, or with an entry that has no value
// at all (h[key] = nil), which net/http documents as marking a request
// idempotent without sending the header (Prometheus' API client does so on
// every POST query). An empty string value does not count.
func idempotencyKey(h http.Header, key string) bool {
	v, ok := h[key]
	return ok && (len(v) == 0 || v[0] != "")
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
// gets one attempt has its body passed through unread. It records the
// attempts allowed, for RetriesLeftHeader.
func (c *call) Prepare(n int) (int, resilience.EndReason, error) {
	limit, why, err := c.prepare(n)
	c.limit = limit
	return limit, why, err
}

// prepare is Prepare but for the record.
func (c *call) prepare(n int) (int, resilience.EndReason, error) {
	if c.policyErr != nil {
		return 0, 0, c.policyErr // RoundTrip closes the body
	}
	// From here the first attempt, which the engine launches as soon as
	// Prepare succeeds, owns req.Body.
	c.first = c.req.Body
	c.bodyFresh = false
	if n <= 1 {
		return 1, resilience.ReasonAttemptsExhausted, nil
	}
	if !c.mayRepeat() {
		if !replayable(c.req) {
			return 1, resilience.ReasonNotIdempotent, nil
		}
		// A stream the server refused unprocessed may be sent again
		// whatever the method, and this body can be: further attempts
		// are allowed for that failure only (see Classify). The body is
		// not buffered for it: only one that already replays is replayed.
		c.refusedOnly = true
		c.getBody = c.req.GetBody
		return n, 0, nil
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
	c.asIs = false // the first attempt sends the buffer (or prefix), not req.Body
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
	var left string // TimeoutHeader's value, for a peer
	if c.peer {
		var ok bool
		if left, ok = c.timeLeft(ctx); !ok {
			if a.Number == 1 && c.first != nil {
				c.first.Close() // the first attempt owns the body (see Prepare), sent or not
			}
			return nil, errHopTooLate
		}
	}
	body, err := c.attemptBody(a)
	if err != nil {
		return nil, err
	}
	if c.hop != nil && a.Number > 1 {
		c.hop.pushback.Store(true) // retried (or hedged) below
	}
	if a.Number == 1 && !a.Own && c.asIs {
		// Nothing about this attempt differs from the caller's request (its
		// context, body, GetBody and headers are the caller's own), so the
		// base gets the request as is: it may not modify it either.
		return c.send(c.req)
	}
	var ht *headerTimer
	if c.headerTimeout > 0 {
		ctx, ht = withHeaderTimeout(ctx, c.headerTimeout, c.t.cfg.settings.Clock)
	}
	out := c.req.WithContext(ctx)
	out.Body = body
	if ht != nil && body != nil && body != http.NoBody {
		out.Body = ht.metered(body) // its reads time the drain: see drain.go
	}
	if c.getBody != nil {
		out.GetBody = c.getBody
	}
	if header := c.attemptHeaders(a, left); header != nil {
		out.Header = header
	}
	if ht != nil {
		return ht.finish(c.send(out))
	}
	return c.send(out)
}

// attemptBody is the body attempt a sends: the first attempt's (see
// Prepare), or a fresh one from GetBody for a later attempt.
func (c *call) attemptBody(a resilience.AttemptInfo) (io.ReadCloser, error) {
	req := c.req
	if a.Number > 1 && req.Body != nil && req.Body != http.NoBody {
		b, err := c.getBody()
		if err != nil {
			return nil, errors.Join(errors.New("transport: GetBody failed"), err)
		}
		return b, nil
	}
	return c.first, nil
}

// attemptHeaders returns the headers attempt a sends when they are not the
// request's own: the copy OnAttemptStart was given (see NewCarrier), with
// the attempt header and the hop protocol's headers set or dropped; left is
// TimeoutHeader's value for a peer. It returns nil when the request's own
// headers go unchanged.
func (c *call) attemptHeaders(a resilience.AttemptInfo, left string) http.Header {
	header, _ := a.Carrier.(http.Header) // set when OnAttemptStart is installed: see NewCarrier
	name := c.t.cfg.attemptHeader
	if header == nil && (name != "" || c.peer || c.strip) {
		header = c.NewCarrier(a).(http.Header)
	}
	if name != "" {
		setAttemptHeader(header, name, attemptHeaderValue(a))
	}
	switch {
	case c.peer:
		setAttemptHeader(header, RetriesLeftHeader, strconv.Itoa(c.retriesLeft(a.Number)))
		if left != "" {
			setAttemptHeader(header, TimeoutHeader, left)
		} else {
			dropHeader(header, TimeoutHeader) // the caller's own, if it set one: not ours to vouch for
		}
	case c.strip:
		dropHopHeaders(header)
	}
	return header
}

// retriesLeft is RetriesLeftHeader's value for attempt number n: what
// this call's side will do if the attempt fails. Under a caller that will
// retry (see Middleware), that caller's promise: this call makes one
// attempt, and the retry comes from above. Otherwise the attempts this
// call has left, of those Prepare allowed: none for a request that may
// not be repeated (one attempt, or a refused stream alone: no failure
// the next hop could answer with is retried), a body that cannot be sent
// again, a breaker's probe, or a Policy's MaxAttempts. (The budget may
// refuse a retry still; the header does not wait for it to decide.)
func (c *call) retriesLeft(n int) int {
	switch {
	case c.hop != nil && c.hop.above > 0:
		return c.hop.above
	case c.refusedOnly:
		return 0
	}
	return max(c.limit-n, 0)
}

// timeLeft is TimeoutHeader's value for an attempt with context ctx that
// starts now: the time left of the request's deadline and of the
// per-attempt timeout, whichever is sooner, rounded down to the
// millisecond; "" when there is neither (or more than the header holds).
// It reports false when the deadline leaves less than MinHopTimeout: the
// attempt is not sent. The deadline is read on the transport's clock, as
// the backoff's is. (A per-attempt timeout below MinHopTimeout is not
// sent: it cannot be honoured below.)
func (c *call) timeLeft(ctx context.Context) (string, bool) {
	left := c.perAttempt
	if left < MinHopTimeout {
		left = 0
	}
	if dl, ok := ctx.Deadline(); ok {
		d := dl.Sub(c.t.cfg.settings.Clock.Now())
		if d < MinHopTimeout {
			return "", false
		}
		if left == 0 || d < left {
			left = d
		}
	}
	if left == 0 {
		return "", true
	}
	v, _ := formatTimeout(left)
	return v, true
}

// hostName is u's host name as WithHopPeers's predicate sees it: without
// port or brackets, lower-cased.
func hostName(u *url.URL) string {
	h := u.Hostname()
	for i := 0; i < len(h); i++ {
		if 'A' <= h[i] && h[i] <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// dropHeader removes key from h under every spelling.
func dropHeader(h http.Header, key string) {
	for k := range h {
		if strings.EqualFold(k, key) {
			delete(h, k)
		}
	}
}

// setAttemptHeader sets h's canonical key to v, in the attempt's own copy of
// the headers, and removes the key's every other spelling: a caller's
// h["gotry-attempt"] is replaced, not sent beside gotry's value.
func setAttemptHeader(h http.Header, key, v string) {
	for k := range h {
		if k != key && strings.EqualFold(k, key) {
			delete(h, k)
		}
	}
	h[key] = []string{v}
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
	builtIn := d == Default // a classifier's own decision is not overridden by a pushback
	if builtIn {
		d = decide(at, &c.t.cfg.statuses)
	}
	v := resilience.Verdict{Retryable: d == Retry || d == Throttled}
	if v.Retryable && c.refusedOnly && ClassifyError(err) != ClassStreamRefused {
		v.NotIdempotent = true // retryable, but this request is not repeated for it
	}
	if resp == nil {
		// A header timeout is congestion to the concurrency limit, as the
		// engine's own per-attempt timeout is.
		v.Overload = err != nil && c.headerTimeout > 0 && isHeaderTimeout(err)
		return v
	}
	// Retried below already (see Middleware): no further attempt, and the
	// answer still counts as the failure it is.
	v.Pushback = v.Retryable && builtIn && c.peer && !c.t.cfg.ignorePushback && pushedBack(resp.Header)
	v.Code = resp.StatusCode
	// A throttle (see Classifier) is an overload answer too: the limit
	// counts it as congestion, the budget as no success.
	v.Throttle = d == Throttled || throttling(resp)
	v.Overload = v.Throttle || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	if v.Retryable && (v.Throttle || resp.StatusCode == http.StatusServiceUnavailable) {
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			v.RetryAfter, v.HasRetryAfter = parseRetryAfter(ra, c.t.cfg.settings.Clock.Now())
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
