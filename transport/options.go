package transport

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/option"
	"github.com/MrVSiK/gotry/resilience"
)

// Defaults of a Transport built with no options.
const (
	DefaultMaxAttempts     = resilience.DefaultMaxAttempts
	DefaultBudgetRatio     = resilience.DefaultBudgetRatio
	DefaultBudgetReserve   = resilience.DefaultBudgetReserve
	DefaultMaxRetryAfter   = resilience.DefaultMaxRetryAfter
	DefaultMaxBufferedBody = 1 << 20  // 1 MiB
	DefaultMaxRetainedBody = 64 << 10 // 64 KiB
	// retainTimeout bounds how long reading a superseded response's body
	// may take (see WithMaxRetainedBody); the attempt's context bounds it
	// too. A body still arriving after it is cut there.
	retainTimeout = time.Second
)

// DefaultBackoff is the backoff of a Transport built without WithBackoff
// (resilience.DefaultBackoff: full jitter from 100ms, capped at 5s).
func DefaultBackoff() resilience.Backoff { return resilience.DefaultBackoff() }

// config is a Transport's settings; options write it once at New.
type config struct {
	settings        resilience.Settings      // what the options shared with the Retrier set
	hooks           []func(*Transport) Hooks // WithHooks and WithHooksFor, in order; New combines them
	headerTimeout   time.Duration            // WithPerAttemptHeaderTimeout; 0 for none
	classifier      Classifier
	statuses        statusSet
	maxBufferedBody int64
	maxRetainedBody int64
	nonIdempotent   bool
	attemptHeader   string // canonical name of the attempt header; "" for none
	// The hop protocol (hop.go): the Transport's peers and whether their
	// pushback is ignored; Middleware's trusted callers.
	hopPeer        func(host string) bool
	ignorePushback bool
	trustedCallers func(*http.Request) bool
}

func defaultConfig() config {
	return config{
		settings:        resilience.DefaultSettings(),
		statuses:        defaultStatuses,
		maxBufferedBody: DefaultMaxBufferedBody,
		maxRetainedBody: DefaultMaxRetainedBody,
	}
}

// Option configures a Transport, or Middleware: it is resilience.Option,
// so the options a Transport shares with resilience's Retrier
// (WithMaxAttempts, WithBackoff, WithRetryBudget, WithHedging,
// WithAdaptiveHedging, WithBreaker, WithConcurrencyLimit,
// WithPerAttemptTimeout, WithMaxRetryAfter, WithMaxKeys, WithClock,
// WithHooks) are resilience's, written once there: each sets a field of
// resilience.Settings (Transport.Settings reads them back), and this
// package's functions of the same names return them, with what they mean
// for HTTP. The others configure only a Transport (a Retrier given one
// panics). Options are applied in order at New (or Middleware); a later
// option overrides an earlier one, except WithHooks and WithHooksFor,
// which add. Middleware reads WithTrustedCallers and WithClock and
// ignores the others; New ignores WithTrustedCallers. The option
// constructors check their arguments when they are called and panic,
// with a message naming the option and the value, on one that makes no
// sense; New itself panics only where a WithHooksFor func does
// (telemetry's, when one transport is given two different names), and
// ignores nil options.
type Option = resilience.Option

// optionFunc is an option only a Transport takes.
type optionFunc func(*config)

func (f optionFunc) Configure(t *option.Target[resilience.Settings, Hooks]) {
	c, ok := t.Own.(*config)
	if !ok {
		panic("transport: an option of package transport configures a Transport, given to something else")
	}
	f(c)
}

// apply applies opts to c, skipping nil ones.
func (c *config) apply(opts []Option) {
	t := option.Target[resilience.Settings, Hooks]{Settings: &c.settings, Own: c,
		AddHooks: func(h Hooks) { c.hooks = append(c.hooks, func(*Transport) Hooks { return h }) }}
	for _, o := range opts {
		if o != nil {
			o.Configure(&t)
		}
	}
}

// invalid panics with a message naming the option and the value.
func invalid(option string, format string, args ...any) {
	panic(fmt.Sprintf("transport: %s: %s", option, fmt.Sprintf(format, args...)))
}

// WithMaxAttempts sets how many attempts a request may make, retries and
// hedges together (default 3). 1 disables retries and hedging. It panics if
// n < 1.
//
// It bounds gotry's attempts, each one RoundTrip of the base, not what the
// base sends within one: http.Transport itself sends an idempotent request
// (including one marked by an Idempotency-Key entry) once more, on a new
// connection, when a reused connection breaks before any byte of the
// response, so a server may see up to twice n arrivals. An SDK's own
// retries (an OTLP exporter's, the AWS SDK's) are new requests to gotry,
// each with n attempts of its own: see the package's OTLP exporter example.
func WithMaxAttempts(n int) Option { return resilience.WithMaxAttempts(n) }

// WithBackoff sets the delay between retries when nothing else is in flight
// (default DefaultBackoff). It panics on nil; use resilience.Constant(0) to
// retry without waiting.
func WithBackoff(b resilience.Backoff) Option { return resilience.WithBackoff(b) }

// WithRetryBudget sets the retry budget, which bounds the retries and
// hedges of every Transport of a fleet together (default ratio
// DefaultBudgetRatio, 0.25, and reserve DefaultBudgetReserve, 2). It learns
// whether retries work: a retry or hedge pays a token as it launches and
// gets it back if it succeeds, so retries that fix independent failures
// cost nothing, and only the ones that fail are bounded: by ratio tokens
// for each request that succeeded in the last 10 s (and in the last
// second), plus a reserve of reserve retries that successes refill (one a
// second at most). An attempt that times out (WithPerAttemptTimeout, or a
// timeout of the base transport) costs a token more, and its retry is paid
// by the reserve alone: the host is likely still working on it, and a
// burst of retries at the onset of a slowdown would join its queue.
//
// What that means by failure rate, at the default 3 attempts, when each
// attempt fails independently with probability p: a busy Transport retries
// every failure up to p = 20% and all but a few in a thousand at 30%
// (about 1 − p³ of requests succeed: 99.9%, 99.2%, 97.3% at 10, 20, 30%); a
// quiet one (a request a second) lives on its reserve and loses about p⁴
// more (96.3% succeed at 30%). When retries fail
// too (an outage), nothing is refunded or earned: each Transport spends its
// reserve once, then retries no more, about 1.0 attempts a request however
// long the outage lasts; for N replicas, failed retries ≤ ratio ×
// successes + N × reserve (see the resilience package for the whole bound
// and the simulation behind these figures).
//
// WithRetryBudget(0, 0) disables the budget. It panics on a negative, NaN
// or infinite ratio or a reserve outside 0..1000.
func WithRetryBudget(ratio float64, reserve int) Option {
	return resilience.WithRetryBudget(ratio, reserve)
}

// WithHedging launches another attempt when delay passes without a result, up
// to maxHedges extra attempts in flight (default off). Hedging is on when
// both are positive; zero turns it off. It panics on negative values.
//
// Until a hedge fires, attempts run on the caller's goroutine; a hedge that
// wins cancels the caller's attempt and is returned once the base has
// returned from it, so the base must honour the request's context (as
// http.Transport does).
func WithHedging(delay time.Duration, maxHedges int) Option {
	return resilience.WithHedging(delay, maxHedges)
}

// WithAdaptiveHedging hedges with a delay learned per host instead of a
// fixed one, up to maxHedges extra attempts in flight: cfg.MaxExtraLoad is
// the fraction of requests that may get a hedge (0.05: one in twenty), and
// each host's delay is learned from its recent attempt latencies (time to
// response headers): about the (1 − 0.95 × MaxExtraLoad) percentile, or
// just above a fast band where the latencies show a gap, clamped to
// [cfg.MinDelay, cfg.MaxDelay], with a hard cap that keeps hedges within
// MaxExtraLoad of a host's requests plus its starting credit
// (StartingCredit: 20 hedges at 5%), even when latency shifts suddenly. See
// resilience.AdaptiveHedging for the model, the cold start and the bounds.
// A request whose Policy sets a HedgeDelay hedges after that instead; a
// later WithHedging turns adaptive hedging off. It panics, naming the field,
// when cfg makes no sense or maxHedges < 1.
func WithAdaptiveHedging(cfg resilience.AdaptiveHedging, maxHedges int) Option {
	return resilience.WithAdaptiveHedging(cfg, maxHedges)
}

// WithBreaker turns on a circuit breaker per host (default off): per
// req.URL.Host, lower-cased, with an IPv6 literal in canonical form and the
// scheme's default port dropped, so "example.test", "EXAMPLE.test" and
// "example.test:80" share one breaker for http (its key, which hooks report,
// is "example.test"). Zero fields of cfg take resilience's defaults; it panics
// on negative fields. A throttle (a 429, a 503 with Retry-After, or what a
// Classifier marks Throttled) does not count: see Classifier.
func WithBreaker(cfg resilience.BreakerConfig) Option { return resilience.WithBreaker(cfg) }

// WithConcurrencyLimit turns on an adaptive concurrency limit per host
// (default off; hosts are keyed as for WithBreaker): how many
// attempts may be in flight to a host at once, learned from its latency and
// its overload answers (503, 429, per-attempt timeouts), so that when a
// host's capacity drops, the requests it can still answer in time keep
// being answered and the rest fail at once, locally, instead of all of them
// queueing there until they time out. A request over the limit waits
// briefly for a permit (cfg.MaxWait) and is then shed: RoundTrip returns an
// error matching resilience.ErrOverloaded (a *resilience.OverloadError),
// nothing is sent, the request body is closed, and the call ends with the
// give-up reason "overloaded". Retries and hedges need a permit too, and
// never wait. Policy.Criticality and Policy.NoLimit order or exempt one
// request. See resilience.ConcurrencyLimit for the model; it works as well
// when many clients share the host, and below a host's capacity it sheds
// next to nothing. Zero fields of cfg take their defaults; it
// panics, naming the field, on one that makes no sense.
func WithConcurrencyLimit(cfg resilience.ConcurrencyLimit) Option {
	return resilience.WithConcurrencyLimit(cfg)
}

// WithMaxKeys bounds how many hosts (the transport's keys) the per-host
// state (circuit breakers, adaptive hedging, the concurrency limit)
// tracks, together. Default resilience.DefaultMaxKeys (10,000). A new host evicts exactly one: idle
// hosts first, least recently used first; a host with requests in flight
// under its concurrency limit, or whose breaker is open, is kept (until they
// end, or its OpenDuration does), and while every tracked host is such a
// one a new host is served untracked (see Stats). It panics when n < 1.
func WithMaxKeys(n int) Option { return resilience.WithMaxKeys(n) }

// WithHooks adds observation hooks. Several WithHooks (and WithHooksFor)
// options combine: each hook set sees every event, in the order the options
// were given.
func WithHooks(h Hooks) Option { return resilience.WithHooks(h) }

// WithHooksFor adds the hooks that f makes for the transport being built,
// for an adapter whose hooks depend on the transport: telemetry's
// Telemetry.Transport looks at the base (t.Unwrap) and keeps t to read its
// Stats for gauges. New calls f once, before t is ready for use: f may call
// t.Unwrap and keep t, and must not send requests through it or read its
// Stats until New has returned. It combines with WithHooks as WithHooks
// does. It panics on nil.
func WithHooksFor(f func(t *Transport) Hooks) Option {
	if f == nil {
		invalid("WithHooksFor", "func must not be nil")
	}
	return optionFunc(func(c *config) { c.hooks = append(c.hooks, f) })
}

// WithPerAttemptTimeout bounds each attempt until its response headers
// arrive (default none), from the attempt's start: the upload of the
// request body counts (WithPerAttemptHeaderTimeout does not count it). An
// attempt that times out is retried; the response body of a successful
// attempt is never cut off by it. It panics if d < 0.
//
// Over HTTP/2 a retry may go back onto the connection that the timed-out
// attempt was on: http.Transport keeps a connection that stopped answering
// in its pool (a cut-off attempt only resets its stream) until the
// connection's health check closes it; with no health check, until TCP
// gives up on it (minutes), or never, when a stalled peer or proxy still
// acknowledges packets.
// Turn the check on (http.Transport's HTTP2 field, an http.HTTP2Config
// with SendPingTimeout, and PingTimeout, which defaults to 15s) and give
// requests attempts enough to outlast it: the attempt in flight when the
// check closes the connection fails with "http2: client connection lost",
// which is retried (ClassConnectionClosed), on a new connection.
func WithPerAttemptTimeout(d time.Duration) Option { return resilience.WithPerAttemptTimeout(d) }

// WithPerAttemptHeaderTimeout bounds each attempt's wait for its response
// headers, measured from the moment the server may be expected to have the
// whole request, body included (default none): it is net/http's
// Transport.ResponseHeaderTimeout, per attempt, settable per request
// (Policy.PerAttemptHeaderTimeout), on the transport's clock, and started
// only once a slow link's queue may have drained. Unlike
// WithPerAttemptTimeout, which runs from the start of the attempt, it does
// not count the time an upload takes: a large body over a slow link is not
// cut off while it is still being sent, and a server that has the whole
// request and does not answer still is. An attempt it cuts off is a
// per-attempt timeout in every other respect: its error matches
// ErrAttemptTimeout (ClassAttemptTimeout), it is retried, and the budget
// and the concurrency limit count it as a timeout. The response body is
// never cut off by it. The two timeouts may be set together; the first to
// expire ends the attempt. It panics if d < 0.
//
// The wait starts when the base reports that the request has been written
// (httptrace.ClientTrace's WroteRequest, on the attempt's context; a
// ClientTrace the caller's context carries still gets its own hooks), plus
// the time the bytes still queued between the client's socket and the
// server may take to arrive. The write ends when the body's last byte has
// entered the socket; over a slow link the socket has taken megabytes
// ahead of the link, into buffers, and the server receives them seconds
// later. The transport estimates that time from the body's reads (the
// socket, once full, takes bytes at the link's rate): the bytes read ahead
// of that rate, over that rate. The extension is never more than the
// upload itself took, and it is zero when the reads kept one pace from the
// start (a slow source, a fast link) or when the buffers took the whole
// body at once, which leaves nothing to measure a rate by (on Linux a body
// of up to about 4 MiB, or any body over loopback): size the timeout to
// cover such a body's drain over the slowest link you expect (4 MiB at
// 2,000 KB/s: 2 s). A request that http.Transport writes again by itself,
// on a new connection, waits from the rewrite, with no extension. The
// package doc (Timeouts) gives the figures measured.
//
// A base that does not report the write (not an http.Transport, nor a
// wrapper of one) never starts the timer. When it is set, an attempt costs
// about ten allocations more (its body's wrapper none); unset, nothing. The
// body is then read through a wrapper: an *os.File body sent over plain
// HTTP/1.1 is copied through memory rather than by sendfile.
func WithPerAttemptHeaderTimeout(d time.Duration) Option {
	if d < 0 {
		invalid("WithPerAttemptHeaderTimeout", "timeout must not be negative, got %v", d)
	}
	return optionFunc(func(c *config) { c.headerTimeout = d })
}

// WithClassifier installs a classifier consulted before the built-in rules;
// when it returns Default the built-in rules decide. It panics on nil.
func WithClassifier(cl Classifier) Option {
	if cl == nil {
		invalid("WithClassifier", "classifier must not be nil")
	}
	return optionFunc(func(c *config) { c.classifier = cl })
}

// WithRetryableStatuses replaces the retryable statuses (default 502, 503,
// 504). 429 stays retryable. It panics on a code outside 100..599.
func WithRetryableStatuses(codes ...int) Option {
	for _, code := range codes {
		if code < 100 || code > 599 {
			invalid("WithRetryableStatuses", "status code must be in 100..599, got %d", code)
		}
	}
	s := statusSet{}.with(codes...)
	return optionFunc(func(c *config) { c.statuses = s })
}

// WithMaxRetryAfter sets the longest Retry-After the transport will wait for
// (default 30s); a longer one ends the request with that response. 0 honours
// only "Retry-After: 0". It panics if d < 0.
func WithMaxRetryAfter(d time.Duration) Option { return resilience.WithMaxRetryAfter(d) }

// WithMaxBufferedBody sets how many bytes of a request body without GetBody
// may be buffered so it can be replayed (default 1 MiB). A larger body is
// sent once, never retried or hedged. 0 never buffers. It panics if n < 0.
func WithMaxBufferedBody(n int64) Option {
	if n < 0 {
		invalid("WithMaxBufferedBody", "limit must not be negative, got %d", n)
	}
	return optionFunc(func(c *config) { c.maxBufferedBody = n })
}

// WithMaxRetainedBody sets how many bytes of a retryable response's body are
// kept when a retry or hedge supersedes it (default 64 KiB). Such a response
// is not held open while the next attempt runs: its body is read into memory
// (for at most a second, and never past the attempt's context), the original
// is closed so its connection goes back to the pool, and the status, headers
// and those bytes are kept. If the transport gives up, that response is
// returned with exactly those bytes. When the body was longer than n bytes,
// or could not be read in time, the returned Body yields the bytes that were
// kept and then an error matching ErrBodyTruncated, never a silent EOF. 0
// keeps status and headers only. It panics if n < 0.
func WithMaxRetainedBody(n int64) Option {
	if n < 0 {
		invalid("WithMaxRetainedBody", "limit must not be negative, got %d", n)
	}
	return optionFunc(func(c *config) { c.maxRetainedBody = n })
}

// WithNonIdempotentRetries lets POST, PATCH and other non-idempotent requests
// be retried and hedged (default false). Without it such a request is
// still retried after an HTTP/2 stream the server refused unprocessed
// (ClassStreamRefused), when its body replays without buffering. Enable it only when the server
// deduplicates, or when sending a request twice does no harm (an OTLP
// export, on a transport of the exporter's own); an Idempotency-Key or
// X-Idempotency-Key header already makes one request eligible, and so does
// an entry for either with no value (req.Header["Idempotency-Key"] = nil,
// which net/http documents as marking a request idempotent without sending
// the header).
func WithNonIdempotentRetries(on bool) Option {
	return optionFunc(func(c *config) { c.nonIdempotent = on })
}

// WithAttemptHeader sends, on every attempt, a header named name saying
// which attempt it is, so the server can see retries and hedges (to shed
// excessive retries, or annotate its own spans), as Envoy's
// x-envoy-attempt-count and gRPC's grpc-previous-rpc-attempts do. Its value
// is the 1-based attempt number, a semicolon, a space and the attempt's
// kind: "1; initial", "2; retry", "3; hedge" (a server wanting only the
// count reads the digits before the semicolon). Off by default; the
// caller's request is never modified (each attempt sends its own copy of
// the headers, one allocation per attempt), and a value the caller set
// under that name is replaced on the attempts. It panics if name is not a
// valid header name.
func WithAttemptHeader(name string) Option {
	if !validHeaderName(name) {
		invalid("WithAttemptHeader", "name %q is not a valid header name", name)
	}
	name = http.CanonicalHeaderKey(name)
	return optionFunc(func(c *config) { c.attemptHeader = name })
}

// validHeaderName reports whether s is a non-empty HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// WithClock runs the transport on c: its backoff sleeps, hedge timers,
// per-attempt timeouts, breaker and budget windows and Retry-After dates
// (default the wall clock; nil is ignored); and Middleware on c, for the
// deadline it sets from a caller's TimeoutHeader. A test passes a
// clock.Fake and moves it on instead of sleeping (see the clock package's
// example); the transport runs the same code on it as on the wall clock.
// Resilience's Retrier, telemetry and the kit take the same option.
func WithClock(cl clock.Clock) Option { return resilience.WithClock(cl) }
