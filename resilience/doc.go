// Package resilience is the HTTP-agnostic core of gotry: backoff
// strategies, a retry budget, per-key circuit breakers, adaptive hedging and
// the attempt engine that schedules retries and hedges, sleeps between them
// and decides when to give up.
//
// Most callers want one of two doors onto the engine. Package transport
// adapts it to http.RoundTripper. [Retry] adapts it to any
// func(context.Context) (T, error):
//
//	r := resilience.NewRetrier(resilience.WithMaxAttempts(4)) // one per dependency, reused
//	cfg, err := resilience.Retry(ctx, r, "config.load", loadConfig)
//
// Both run on an [Engine] and report through one set of [Hooks], so one retry
// policy and one telemetry adapter serve HTTP and non-HTTP work alike.
// Another protocol's adapter is an [Operation] passed to [Execute]; see its
// example. ARCHITECTURE.md at the repository's root draws one call's path.
//
// # Configuration
//
// One [Settings] type configures an Engine ([NewEngine]), a Retrier (its
// options) and package transport's Transport (the same options, written
// once here: transport.Option is [Option]). Every configuration struct
// (Settings, [BreakerConfig], [AdaptiveHedging], [ConcurrencyLimit],
// [Policy], transport.Policy) follows one rule: a zero field takes its
// documented default (a Policy's default is its engine's setting), so each
// struct's zero value is its defaults, and a setting that is on by default
// is turned off by saying so, with [Off]. Each Validate names the field it
// rejects; Settings() on an Engine, a Retrier or a Transport reports the
// values in effect, every default filled in.
//
// # Backoff
//
// A [Backoff] returns the delay before retry n (1 for the first retry),
// given the previous delay. The constructors:
//
//   - [Constant](d): d every time.
//   - [Exponential](base, max): base·2^(n−1), capped at max.
//   - [ExponentialJitter](base, max): uniform in [0, Exponential] ("full
//     jitter"), the transport's default.
//   - [EqualJitter](base, max): uniform in [Exponential/2, Exponential].
//   - [DecorrelatedJitter](base, max): min(max, uniform[base, 3·prev]).
//   - [BackoffFunc]: your own function.
//
// None overflows: for any retry number and any configuration the delay is
// never negative and never above max (a property test holds this). Every
// jittered delay, here and in the kit below, is drawn by one implementation
// with closed bounds ([0, d], not [0, d)).
//
// # Retrier and Retry
//
// A [Retrier] holds a policy (attempts, backoff, a per-attempt timeout
// separate from the caller's deadline, hedging), a retry budget and breakers
// keyed by the key each Retry call names. [Retry] returns the first result
// its predicate calls final. By default ([DefaultRetryIf]) every error is
// retried except those wrapped by [Permanent] and the caller's own context
// errors; [WithRetryIf] replaces that for a Retrier and [RetryIf] for one
// call, seeing the result as well as the error. An error with a method
// RetryAfter() time.Duration in its chain dictates the next delay, as an
// HTTP Retry-After does. [ReleaseWith] is handed every successful result
// that is not returned (hedge losers, superseded results, and the one kept
// when a panic ends the call), so connections and pooled objects are not
// leaked. Every attempt's context is cancelled by the time Retry returns.
//
// # Retry budget
//
// The budget keeps retries from multiplying an outage, for a fleet of
// replicas as for one process, and learns whether retries work: a retry or
// hedge pays a token as it launches and gets it back if it succeeds, so
// only retries that fail are bounded, by what succeeds. A reserve
// ([DefaultBudgetReserve] retries by default) pays first; successes refill
// it, one a second at most, so during an outage each replica spends it
// once and then stops. Then every call that succeeds deposits ratio tokens
// ([DefaultBudgetRatio]), which expire over a 10-second window and pay a
// busy client while its retries work, no faster than its last second
// earned, so savings never burst out at the start of an outage. A timeout
// costs a token more. By failure rate, with attempts failing independently
// with probability p, a busy client retries every failure up to p = 20%
// and all but a few in a thousand at 30% (about 1 − p³ succeed at 3
// attempts), a quiet one all but about p⁴; in an
// outage a client sends about 1.0 attempts a request. A retry takes its
// token before its backoff sleep, giving it back if the retry then does
// not launch. With the budget empty, no new attempt launches; attempts in
// flight continue and the last result is returned. The exact bound is
// property-tested and stated beside the code (resilience/budget.go, with
// the simulation in budget_ladder_test.go): for N clients sharing a
// downstream, failed retries over any interval ≤ ratio × successes (from
// 9 s before it) + N × reserve + the reserve's refills, which are at most
// one per client per second and no more than the successes, so none in an
// outage. The bookkeeping is lock-free.
//
// # Circuit breakers
//
// A breaker per key ([BreakerConfig]; zero fields take their defaults)
// counts retryable results as failures and final results without an error
// as successes; a final error (a permanent one, the caller's cancellation),
// a cancelled hedge loser, a result from an earlier state of the breaker
// and a throttle (Verdict.Throttle: the server, alive, asking for less,
// which Retry-After, the budget and the concurrency limit answer) are not
// counted. FailureThreshold consecutive failures
// open it; after OpenDuration it is half-open and admits HalfOpenProbes
// probes, each with exactly one attempt and holding its slot until that
// attempt ends. One success closes it, one failure opens it again. A
// refused call fails with an error matching [ErrCircuitOpen]. The breaker is
// asked before every attempt; if it opens during a call, no further attempt
// launches. State changes lazily, with no timer or goroutine. [BreakerState]
// prints as closed, open or half-open.
//
// # Per-key state
//
// An engine keeps what it knows of each key (its breaker, its adaptive
// hedging state, its concurrency limit) in one entry per key, bounded by
// Settings.MaxKeys exactly (WithMaxKeys, for a Retrier and for the
// transport). A new key evicts exactly one:
// idle keys first, then breakers counting failures, then half-open ones,
// least recently used first within each (by the order of the uses
// themselves). A key with attempts in flight under its concurrency limit,
// or whose breaker is open, stays until those attempts end or its
// OpenDuration does, and while every key is such a one a new key is served
// untracked (Stats.UntrackedAdmissions). [Engine.Stats] is a snapshot of all of it.
//
// # Concurrency limit
//
// [ConcurrencyLimit] bounds the attempts in flight per key, learning the
// bound from latency and overload answers, so that a downstream whose
// capacity drops keeps being sent what it can answer in time; the excess
// is shed at once with [ErrOverloaded]. Its doc gives the model.
//
// # Hedging
//
// A hedge is another attempt launched when the hedge delay passes with no
// result, with no backoff; hedges and retries share MaxAttempts and the
// budget. [AdaptiveHedging] learns the delay per key from recent latencies
// under a stated extra-load cap, which it enforces with a token bucket.
//
// # Events and giving up
//
// [Hooks] has a field per event: a call starts and ends, an attempt starts
// and ends (success, retryable, failure or cancelled), a retry is scheduled,
// a backoff sleep ends, a hedge launches, the budget refuses, a breaker
// refuses or changes state, and the caller is done with the result. Every
// event embeds [Event]: the call's or attempt's context, the key and the
// subject (for the transport, the caller's request). [Combine] joins two
// hook sets. CallEndEvent.Reason, an [EndReason], says why a call ended:
// success, not_retryable, or a give-up (attempts_exhausted,
// budget_exhausted, circuit_open, retry_after_too_long, past_deadline,
// not_idempotent, body_not_replayable, canceled, overloaded, pushback).
//
// On a give-up the most recent retryable result is returned if there was
// one, with a nil error; otherwise the last error, as an [*Error] when more
// than one attempt ran (its Unwrap reaches the errors of the first and most
// recent attempts, at most eight in all). When the caller's context ends,
// its error is returned.
//
// # Configuration
//
// Options, the backoff constructors and [NewEngine] panic on a value that
// makes no sense, with a message naming it; nil options are ignored. The
// kit's constructors return a *ConfigError instead. Every error and panic
// message starts with the name of the package that made it ("resilience: ",
// "transport: ", ...).
//
// # The kit
//
// Four packages of their own sit below this one; they may build on it, it
// never imports them, and like it they need nothing outside the standard
// library and this module:
// resilience/schedule (a configurable backoff calculator that is also a
// Backoff, and AddJitter for fixed-interval work), resilience/periodic
// (a task every interval plus jitter, each run under its own timeout, with
// panics recovered and reported and a Stop that waits), resilience/cache
// (a bounded, single-flight TTL cache) and resilience/dnscache (a DNS cache
// with a DialContext for http.Transport).
//
// Everything here is safe for concurrent use unless its doc says otherwise,
// and the package imports only the standard library and gotry's internal
// packages.
package resilience
