package resilience

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/clock"
)

// Retrier runs any func(context.Context) (T, error) with the same engine as
// the HTTP transport: attempts, backoff, per-attempt timeout, hedging, a
// retry budget, circuit breakers keyed by a caller-chosen key, and the same
// Hooks and give-up semantics. Build one per dependency and reuse it, so its
// budget and breakers have memory. Safe for concurrent use.
type Retrier struct {
	engine   *Engine
	settings Settings
	policy   Policy // settings.Policy(), made once
	retryIf  func(error) bool
}

// Defaults that the Retrier and the transport share (package transport's
// constants of the same names are these).
const (
	// DefaultMaxAttempts is how many attempts a call may make, retries and
	// hedges together.
	DefaultMaxAttempts = 3
	// DefaultMaxRetryAfter is the longest server-dictated delay waited for:
	// a server asking for longer is better answered at once than waited
	// on while the caller's deadline runs down.
	DefaultMaxRetryAfter = 30 * time.Second
)

// DefaultBackoff is the backoff when none is set: full jitter from 100ms
// (the order of a loopback-to-region round trip, so a first retry does
// not pile onto a failure still in progress), capped at 5s (past which a
// caller's deadline usually ends first).
func DefaultBackoff() Backoff { return ExponentialJitter(100*time.Millisecond, 5*time.Second) }

// Option configures a Retrier. Options are applied in order at NewRetrier;
// a later option overrides an earlier one, except WithHooks, which adds. The
// option constructors check their arguments when they are called and panic,
// with a message naming the option and the value, on one that makes no
// sense; NewRetrier itself panics only where a WithHooksFor func does
// (telemetry's, when one Retrier is given two different names), and
// ignores nil options. The options the Retrier shares with package
// transport set the fields of one Settings, under the same names, from the
// same defaults, with the same validation (Retrier.Settings reads them
// back).
type Option interface{ apply(*retrierConfig) }

type optionFunc func(*retrierConfig)

func (f optionFunc) apply(c *retrierConfig) { f(c) }

type retrierConfig struct {
	settings Settings
	hooks    []func(*Retrier) Hooks // WithHooks and WithHooksFor, in order
	retryIf  func(error) bool
}

// setting returns the option that applies set, after checking it (see
// checkSetting).
func setting(option string, set func(*Settings)) Option {
	checkSetting(option, set)
	return optionFunc(func(c *retrierConfig) { set(&c.settings) })
}

// WithMaxAttempts sets the attempt limit, retries and hedges together
// (default DefaultMaxAttempts). It panics if n < 1.
func WithMaxAttempts(n int) Option {
	return setting("WithMaxAttempts", func(s *Settings) { s.MaxAttempts = n })
}

// WithBackoff sets the delay between retries (default DefaultBackoff). It panics on nil.
func WithBackoff(b Backoff) Option {
	return setting("WithBackoff", func(s *Settings) { s.Backoff = b })
}

// WithPerAttemptTimeout bounds each attempt separately from the caller's
// deadline (default none); a timed-out attempt is retried. It panics if d < 0.
func WithPerAttemptTimeout(d time.Duration) Option {
	return setting("WithPerAttemptTimeout", func(s *Settings) { s.PerAttemptTimeout = d })
}

// WithHedging launches another attempt when delay passes without a result,
// up to maxHedges extra in flight (default off; zero turns it off). It
// panics on negatives.
func WithHedging(delay time.Duration, maxHedges int) Option {
	return setting("WithHedging", func(s *Settings) {
		s.HedgeDelay, s.MaxHedges, s.AdaptiveHedging = delay, maxHedges, nil
	})
}

// WithAdaptiveHedging hedges each call after a delay learned from its
// key's recent latencies, with at most maxHedges extra attempts in flight
// and hedges held within cfg.MaxExtraLoad of the calls (see
// AdaptiveHedging for the model, the cold start and the bounds); as
// transport.WithAdaptiveHedging does for hosts. A later WithHedging turns it
// off. It panics, naming the field, when cfg makes no sense or
// maxHedges < 1.
func WithAdaptiveHedging(cfg AdaptiveHedging, maxHedges int) Option {
	return setting("WithAdaptiveHedging", func(s *Settings) {
		s.AdaptiveHedging, s.HedgeDelay, s.MaxHedges = &cfg, 0, maxHedges
	})
}

// WithMaxRetryAfter sets the longest delay an error may dictate through a
// RetryAfter method (see Retry) that the Retrier will wait for (default
// DefaultMaxRetryAfter, as the transport's); a longer one ends the call
// with that error. 0 honours only a zero delay. It panics if d < 0.
func WithMaxRetryAfter(d time.Duration) Option {
	return setting("WithMaxRetryAfter", func(s *Settings) { s.MaxRetryAfter = d })
}

// WithRetryBudget sets the retry budget as EngineConfig.BudgetRatio and
// BudgetReserve describe (default DefaultBudgetRatio and
// DefaultBudgetReserve): a retry or hedge pays a token and gets it back if
// it succeeds; each successful call deposits ratio tokens that expire after
// 10s; a reserve of reserve retries, refilled by successes (one a second at
// most), pays first and lets a quiet client absorb a failure. Retries that
// fix independent failures are all paid up to about 30% of attempts
// failing; during an outage, where retries fail, the reserve is spent once,
// not every second. WithRetryBudget(0, 0) disables the budget. It panics
// on a negative, NaN or infinite ratio or a reserve outside 0..1000.
func WithRetryBudget(ratio float64, reserve int) Option {
	return setting("WithRetryBudget", func(s *Settings) { s.BudgetRatio, s.BudgetReserve = ratio, reserve })
}

// WithBreaker turns on a breaker per call key (default off). Zero fields of
// cfg take their defaults; it panics on negative fields.
func WithBreaker(cfg BreakerConfig) Option {
	return setting("WithBreaker", func(s *Settings) { s.Breaker = &cfg })
}

// WithConcurrencyLimit turns on an adaptive concurrency limit per call key
// (default off; see ConcurrencyLimit): a call over it waits briefly, then
// fails at once with an error matching ErrOverloaded without running fn;
// retries and hedges need a permit too. For Retry, what teaches the limit
// congestion is its per-attempt timeouts (WithPerAttemptTimeout) and the
// latency of fn's results. It panics, naming the field, on nonsense.
func WithConcurrencyLimit(cfg ConcurrencyLimit) Option {
	return setting("WithConcurrencyLimit", func(s *Settings) { s.ConcurrencyLimit = &cfg })
}

// WithMaxKeys bounds how many call keys the breakers and the concurrency
// limit track, together (transport.WithMaxHosts for the transport). Default
// DefaultMaxKeys. It panics when n < 1.
func WithMaxKeys(n int) Option {
	return setting("WithMaxKeys", func(s *Settings) { s.MaxKeys = n })
}

// WithHooks adds hooks. Several WithHooks (and WithHooksFor) options
// combine: each hook set sees every event, in the order the options were
// given.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *retrierConfig) { c.hooks = append(c.hooks, func(*Retrier) Hooks { return h }) })
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
	return optionFunc(func(c *retrierConfig) { c.hooks = append(c.hooks, f) })
}

// WithClock runs the Retrier on c: its backoff sleeps, hedge timers,
// attempt timeouts, breaker and budget windows (default the wall clock; nil
// is ignored). A test passes a clock.Fake and moves it on instead of
// sleeping (see the clock package's example).
func WithClock(c clock.Clock) Option {
	return optionFunc(func(rc *retrierConfig) {
		if c != nil {
			rc.settings.Clock = c
		}
	})
}

// WithRetryIf sets which errors are retried when a call gives no predicate
// of its own (default DefaultRetryIf). It panics on nil.
func WithRetryIf(f func(error) bool) Option {
	if f == nil {
		panic("resilience: WithRetryIf: predicate must not be nil")
	}
	return optionFunc(func(c *retrierConfig) { c.retryIf = f })
}

// NewRetrier returns a Retrier.
func NewRetrier(opts ...Option) *Retrier {
	c := retrierConfig{settings: DefaultSettings(), retryIf: DefaultRetryIf}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	r := &Retrier{settings: c.settings, policy: c.settings.Policy(), retryIf: c.retryIf}
	ec := c.settings.EngineConfig()
	for _, f := range c.hooks {
		ec.Hooks = Combine(ec.Hooks, f(r))
	}
	r.engine = NewEngine(ec)
	return r
}

// Settings returns the settings the Retrier was built with (a copy: changing
// it changes nothing).
func (r *Retrier) Settings() Settings { return r.settings.Clone() }

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
// (capped by nothing but ctx's deadline).
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
	res := Execute[*result[T]](ctx, r.engine, Call[*result[T]]{Key: key, Policy: r.policy, Op: op})
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
