package resilience

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/option"
)

// Retrier runs any func(context.Context) (T, error) with the same engine as
// the HTTP transport: attempts, backoff, per-attempt timeout, hedging, a
// retry budget, circuit breakers keyed by a caller-chosen key, and the same
// Hooks and give-up semantics. Build one per dependency and reuse it, so its
// budget and breakers have memory. Safe for concurrent use.
type Retrier struct {
	engine  *Engine
	retryIf func(error) bool
}

// WithHooksFor adds the hooks that f makes for the Retrier being built, for
// an adapter whose hooks depend on it (telemetry's Telemetry.Retrier keeps r
// to read its Stats for gauges). NewRetrier calls f once, before r is ready
// for use: f may keep r, and must not run calls on it or read its Stats
// until NewRetrier has returned. It combines with WithHooks as WithHooks
// does. It panics on nil.
func WithHooksFor(f func(r *Retrier) Hooks) Option {
	if f == nil {
		panic("resilience: WithHooksFor: func must not be nil")
	}
	return ownOption(func(c *retrierConfig) { c.hooks = append(c.hooks, f) })
}

// WithRetryIf sets which errors are retried when a call gives no predicate
// of its own (default DefaultRetryIf). It panics on nil.
func WithRetryIf(f func(error) bool) Option {
	if f == nil {
		panic("resilience: WithRetryIf: predicate must not be nil")
	}
	return ownOption(func(c *retrierConfig) { c.retryIf = f })
}

// retrierConfig is what a Retrier's own options (WithHooksFor, WithRetryIf)
// and WithHooks set; the shared options set its Settings.
type retrierConfig struct {
	hooks   []func(*Retrier) Hooks // WithHooks and WithHooksFor, in order
	retryIf func(error) bool
}

// ownOption is an option only a Retrier takes.
type ownOption func(*retrierConfig)

func (f ownOption) Configure(t *option.Target[Settings, Hooks]) {
	c, ok := t.Own.(*retrierConfig)
	if !ok {
		panic("resilience: WithHooksFor or WithRetryIf configures a Retrier, given to something else")
	}
	f(c)
}

// NewRetrier returns a Retrier. Options are applied in order; a later
// option overrides an earlier one, except WithHooks and WithHooksFor,
// which add. NewRetrier panics only where a WithHooksFor func does
// (telemetry's, when one Retrier is given two different names) or when
// given an option of package transport that only a Transport takes (a
// classifier, say); it ignores nil options.
func NewRetrier(opts ...Option) *Retrier {
	s := DefaultSettings()
	c := retrierConfig{retryIf: DefaultRetryIf}
	t := option.Target[Settings, Hooks]{Settings: &s, Own: &c,
		AddHooks: func(h Hooks) { c.hooks = append(c.hooks, func(*Retrier) Hooks { return h }) }}
	for _, o := range opts {
		if o != nil {
			o.Configure(&t)
		}
	}
	r := &Retrier{retryIf: c.retryIf}
	fors := make([]func(*Engine) Hooks, len(c.hooks))
	for i, f := range c.hooks {
		fors[i] = func(*Engine) Hooks { return f(r) }
	}
	r.engine = NewEngine(s, fors...)
	return r
}

// Settings returns the settings the Retrier runs with, every default
// filled in (a copy: changing it changes nothing).
func (r *Retrier) Settings() Settings { return r.engine.Settings() }

// Stats returns a snapshot of the retrier's budget, breakers and limits (see
// Engine.Stats; its Hosts are the call keys). For gauges: it allocates.
func (r *Retrier) Stats() Stats { return r.engine.Stats() }

type permanentError struct{ err error }

func (p *permanentError) Error() string   { return p.err.Error() }
func (p *permanentError) Unwrap() []error { return []error{p.err, ErrPermanent} }

// Permanent wraps err so DefaultRetryIf does not retry it. Permanent(nil) is
// nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// DefaultRetryIf retries every non-nil error except permanent ones and the
// caller's context errors; a per-attempt timeout is retried.
func DefaultRetryIf(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrAttemptTimeout):
		return true
	case errors.Is(err, ErrPermanent), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

// RetryOption configures one Retry call. A nil RetryOption is ignored.
type RetryOption[T any] func(*retryOp[T])

// RetryIf decides from the result and the error whether an attempt is
// retryable, replacing the Retrier's error predicate for this call. It may
// be called concurrently when hedging.
func RetryIf[T any](pred func(v T, err error) bool) RetryOption[T] {
	return func(o *retryOp[T]) { o.pred = pred }
}

// ReleaseWith is called with every successful result (nil error) that is not
// returned: a hedge loser, a retryable result superseded by a later attempt,
// one cut off by the per-attempt timeout, and one kept as retryable when a
// panic (in a later attempt, a predicate or a hook) ends the call. Use it to
// close connections or return pooled objects. It may run on an attempt's
// goroutine after Retry has returned (a hedge that finishes late).
func ReleaseWith[T any](release func(T)) RetryOption[T] {
	return func(o *retryOp[T]) { o.release = release }
}

// retryAfterError is what an error implements to dictate the delay before
// the next retry, as an HTTP Retry-After does: a method
// RetryAfter() time.Duration anywhere in its chain (see Retry).
type retryAfterError interface {
	error
	RetryAfter() time.Duration
}

// Retry runs fn under r's policy. key selects the breaker and names the
// operation in hooks. It returns the first non-retryable result; on give-up,
// the most recent retryable result with a nil error if there was one,
// otherwise the last error (an *Error when more than one attempt ran). When
// ctx ends, ctx's error is returned. Each attempt's context is cancelled by
// the time Retry returns, or a panic leaves it: Retry runs the call under a
// context of its own, derived from ctx and cancelled on the way out (one
// allocation per call, plus a goroutine while the call runs when ctx is a
// cancelable context of a type the context package does not know). A panic
// in fn, a predicate or a hook propagates to the caller after every result
// still kept has been passed to ReleaseWith. Nil options are ignored. A
// retryable error with a method RetryAfter() time.Duration in its chain
// dictates the delay before the next retry, as an HTTP Retry-After does
// (up to WithMaxRetryAfter, and never past ctx's deadline).
func Retry[T any](ctx context.Context, r *Retrier, key string, fn func(context.Context) (T, error), opts ...RetryOption[T]) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	op := &retryOp[T]{fn: fn, retryIf: r.retryIf}
	for _, o := range opts {
		if o != nil {
			o(op)
		}
	}
	done := false
	defer func() {
		if !done { // a panic is passing through
			op.releaseHeld()
		}
	}()
	res := Execute[*result[T]](ctx, r.engine, Call[*result[T]]{Key: key, Op: op})
	done = true
	res.Finish(nil)
	var v T
	if res.Value != nil {
		v = res.Value.v
	}
	return v, res.Err
}

// result carries one attempt's value through the engine. Being a pointer, it
// lets retryOp tell which values are still held (neither released nor
// returned) when a panic ends the call.
type result[T any] struct{ v T }

// retryOp adapts a function to Operation.
type retryOp[T any] struct {
	fn      func(context.Context) (T, error)
	retryIf func(error) bool
	pred    func(T, error) bool
	release func(T)

	first result[T] // the first attempt's result, allocated with the op

	mu   sync.Mutex   // guards held; attempts may end concurrently when hedging
	held []*result[T] // results with a nil error not yet released (only with a release func)
}

func (o *retryOp[T]) Prepare(n int) (int, EndReason, error) { return n, 0, nil }

func (o *retryOp[T]) Do(ctx context.Context, a AttemptInfo) (*result[T], error) {
	v, err := o.fn(ctx)
	res := &o.first
	if a.Number > 1 {
		res = new(result[T]) // one allocation per later attempt
	}
	res.v = v
	if err == nil && o.release != nil {
		o.mu.Lock()
		o.held = append(o.held, res)
		o.mu.Unlock()
	}
	return res, err
}

func (o *retryOp[T]) Classify(res *result[T], err error, _ AttemptInfo) Verdict {
	var v T
	if res != nil { // nil when a per-attempt timeout cut the result off
		v = res.v
	}
	var verd Verdict
	if o.pred != nil {
		verd.Retryable = o.pred(v, err)
	} else {
		verd.Retryable = o.retryIf(err)
	}
	var ra retryAfterError
	if verd.Retryable && errors.As(err, &ra) {
		verd.RetryAfter, verd.HasRetryAfter = ra.RetryAfter(), true
	}
	return verd
}

// Retain keeps res as it is: a value of the generic retrier holds nothing the
// next attempt needs.
func (o *retryOp[T]) Retain(_ context.Context, res *result[T]) *result[T] { return res }

// Release passes res's value to the release func, unless releaseHeld
// already did.
func (o *retryOp[T]) Release(res *result[T]) {
	if o.release == nil || res == nil {
		return
	}
	o.mu.Lock()
	i := -1
	for j, h := range o.held {
		if h == res {
			i = j
			break
		}
	}
	if i >= 0 {
		o.held = append(o.held[:i], o.held[i+1:]...)
	}
	o.mu.Unlock()
	if i >= 0 {
		o.release(res.v)
	}
}

// releaseHeld releases every value still held, when a panic ends the call
// before the engine could. Attempts still running release their own results
// when they end, through Release.
func (o *retryOp[T]) releaseHeld() {
	if o.release == nil {
		return
	}
	o.mu.Lock()
	held := o.held
	o.held = nil
	o.mu.Unlock()
	for _, res := range held {
		o.release(res.v)
	}
}
