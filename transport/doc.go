// Package transport is gotry's http.RoundTripper. Wrap any base transport
// and every call made through it (client.Get, client.Do, any SDK that takes
// an *http.Client) gains retries with backoff, Retry-After handling, a retry
// budget, a per-host circuit breaker and request hedging, with hooks that
// let telemetry see every attempt:
//
//	client := &http.Client{Transport: transport.New(nil)} // nil: http.DefaultTransport
//	resp, err := client.Get(url)                         // unchanged call site
//
// The scheduling (attempts, hedges, sleeps, budget, breakers, giving up) is
// [resilience.Engine]; this package adapts it to HTTP: it clones requests,
// replays bodies, classifies responses and honours Retry-After. A Transport
// is safe for concurrent use. Create one per downstream and reuse it: the
// budget and the breakers learn from the traffic they see, and a Transport
// per request has no memory.
//
// # Options and defaults
//
// With no options, [New] retries up to [DefaultMaxAttempts] attempts in all
// with [DefaultBackoff] (full jitter, 100ms doubling to at most 5s), a retry
// budget of [DefaultBudgetRatio] with a reserve of [DefaultBudgetReserve]
// retries refilled by successes, Retry-After honoured up to [DefaultMaxRetryAfter],
// bodies without GetBody buffered up to [DefaultMaxBufferedBody], and
// superseded responses kept up to [DefaultMaxRetainedBody]. Hedging, the
// breaker, per-attempt timeouts, hooks and the attempt header are off until
// their option is given.
//
// The options this package shares with resilience's Retrier (attempts,
// backoff, hedging, the budget, the breaker, the limit, per-attempt
// timeouts, the Retry-After cap, the key bound, the clock, hooks) are
// resilience's, written once: [Option] is resilience.Option, and
// [Transport.Settings] reports the resilience.Settings they set, every
// default filled in.
//
// An option given a value that makes no sense (attempts below 1, a NaN or
// negative budget ratio, a negative duration, a nil backoff or classifier, a
// status outside 100–599) panics where it is called, naming the option and
// the value: WithMaxAttempts(0) panics before New runs. New itself never
// panics and ignores nil options. A per-request [Policy] that makes no sense
// does not panic: RoundTrip returns an error naming the field before any
// attempt, and closes the body.
//
// # What is retried
//
// An attempt is retried when it is classified retryable. By default
// ([DefaultClassifier]) that is:
//
//   - a response with status 502, 503 or 504 ([WithRetryableStatuses]
//     replaces that list) or 429, which is always retryable;
//   - a connection that was refused, reset, aborted, hit a broken pipe or
//     closed before a full response (EOF, unexpected EOF); a network
//     timeout; any other failure to dial; a DNS failure other than "not
//     found"; and a per-attempt timeout ([ErrAttemptTimeout]);
//   - over HTTP/2, a stream the server reset (RST_STREAM, as Go's server
//     does when a handler panics: [ClassStreamReset]), HTTP/2's way of
//     failing one request where HTTP/1.1 closes the connection; and a
//     stream the server refused unprocessed (REFUSED_STREAM, or above the
//     last stream id of its GOAWAY: [ClassStreamRefused]), which is retried
//     even when the request may not be repeated (see below).
//
// Everything else is final: other statuses, TLS and certificate failures,
// DNS "not found", and the caller's own context errors (context.Canceled
// and context.DeadlineExceeded however wrapped; a per-attempt timeout is a
// different error and is retried). Errors are told apart by type, never by
// message; [ClassifyError] exposes the classes. [WithClassifier] installs a
// [Classifier] that sees each [Attempt] and may return [Retry], [DontRetry],
// [Throttled] (retry, and the answer is the server throttling this client:
// see the circuit breaker below) or [Default] to fall back to the built-in
// rules; see the example.
//
// # Idempotency and request bodies
//
// A request is eligible for retries and hedges only when both hold:
//
//  1. It may be repeated: its method is GET, HEAD, OPTIONS, TRACE, PUT or
//     DELETE; or it carries an Idempotency-Key or X-Idempotency-Key header;
//     or non-idempotent retries are allowed ([WithNonIdempotentRetries], or
//     Policy.RetryNonIdempotent for one request).
//  2. Its body can be sent again: no body, http.NoBody, a GetBody function
//     (http.NewRequest sets one for a *bytes.Reader, *bytes.Buffer or
//     *strings.Reader), or a body of at most [WithMaxBufferedBody] bytes,
//     which is then read into memory. A larger body is sent once, exactly as
//     given.
//
// An ineligible request gets one attempt, with one exception: when the
// request may not be repeated but its body can be replayed without
// buffering (no body, or a GetBody), it is retried after, and only after,
// an HTTP/2 stream the server refused unprocessed ([ClassStreamRefused]):
// RFC 9113 §8.7 guarantees such a stream was not processed, so the
// request still reaches the server's logic at most once. Such a request is
// never hedged; any other retryable failure ends it, with the give-up
// reason not_idempotent, as before. (net/http's Transport resends a
// refused stream itself first, when it can replay the body: at once, then
// after 1s, 2s, 4s and so on, 7 tries in all; gotry sees the refusal when
// those ran out or were cut off, or under a base that does not resend,
// such as an http.ClientConn.)
//
// Eligibility is decided before the
// body is touched: a request that will get exactly one attempt (ineligible,
// MaxAttempts 1 as with [NoRetry], or a breaker probe) passes its body to the
// base unread, so streaming uploads work, and a body whose ContentLength is
// above the limit is never read ahead. Reading a body to buffer it stops
// when the request's context ends: the body is closed and the context's
// error returned. The body is closed on every path, as the
// http.RoundTripper contract asks.
//
// The caller's *http.Request is never modified. An attempt that needs its
// own context (hedging, a per-attempt timeout, hooks), its own body (a
// replay) or its own headers is sent as a shallow clone; a first attempt
// that needs none of these is the caller's request itself, exactly what the
// base would get without gotry.
//
// # Retry-After
//
// When a 429 or 503 response, or one a Classifier marks [Throttled], leads
// to a retry, its Retry-After header
// (delay in seconds or an HTTP date) replaces the backoff delay, provided
// the wait is at most [WithMaxRetryAfter] and ends before the request's
// deadline. Otherwise the transport stops and returns that response, so the
// caller sees the server's status and body. Other statuses, and a malformed
// header, use the backoff. The backoff is held to the deadline too: a sleep
// that would end at or past it is not started, and the transport returns
// what it has.
//
// # Retries and hedges share MaxAttempts
//
// Retries and hedges are one mechanism with one limit, [WithMaxAttempts]:
// every attempt, whatever launched it, counts.
//
//   - Hedging ([WithHedging]) is on when the delay and maxHedges are both
//     positive: when the delay passes with no result, another attempt is
//     launched, with no backoff, up to maxHedges extra attempts in flight.
//   - A retryable failure while another attempt is still in flight launches
//     the next attempt at once; with nothing else in flight the transport
//     first waits for the backoff or Retry-After.
//   - Retries after a backoff are hedged too: the hedge timer pauses during
//     the sleep and is armed again when the retry launches.
//   - The first non-retryable result wins. The other attempts are cancelled
//     and their bodies closed unread: nothing on the caller's path waits for
//     a loser.
//   - A retryable response that a retry or hedge will follow is not held
//     open: its body is read into memory (up to [WithMaxRetainedBody], for
//     at most a second and never past the attempt's context) and closed, so
//     its connection can serve the retry. A base limited by MaxConnsPerHost
//     cannot deadlock on its own retries.
//   - The returned response's attempt context is cancelled only when its
//     body is closed or read to the end, so neither a per-attempt timeout nor
//     a hedge's cancellation cuts off a body being read. A response with
//     nothing to read (http.NoBody, which http.Transport returns for HEAD,
//     204, 304 and Content-Length: 0) is finished as RoundTrip returns.
//   - Requests with an Upgrade header (WebSocket, h2c) are retried but never
//     hedged: a losing 101 response would be a live connection. A returned
//     101's body keeps its io.Writer, so resp.Body.(io.ReadWriteCloser)
//     works as with http.Transport.
//   - Attempts run on the caller's goroutine until a hedge actually fires;
//     from then on the hedge timer's goroutine drives the request. A winning
//     hedge cancels the caller's attempt, and RoundTrip returns once the base
//     has returned from it: hedging relies on the base honouring the
//     request's context, as http.Transport does.
//
// [WithAdaptiveHedging] learns the hedge delay per host instead, from the
// percentile of recent first-attempt latencies that keeps hedges within an
// extra-load cap, with a hard cap on the hedges themselves; see
// [resilience.AdaptiveHedging] for the model. Prefer it when the
// downstream's latency moves, or one transport calls hosts of different
// speeds; keep a fixed delay when you want the hedge at an exact moment. A
// request's Policy.HedgeDelay still overrides the learned delay.
// [Transport.Stats] reports each host's current delay (HostStats.HedgeDelay)
// and the cap (Stats.MaxExtraLoad); a [resilience.HedgeEvent] says which
// delay triggered the hedge and whether it was learned.
//
// # Retry budget
//
// One budget ([WithRetryBudget]) is shared by the whole Transport, so
// retries cannot multiply an outage's load, and its bound holds for a fleet
// of replicas, not just one process. It learns whether retries work: a
// retry or hedge pays a token as it launches and gets it back if it
// succeeds, so retries that fix independent failures cost nothing, and only
// the retries that fail are bounded. A reserve of a few retries (2 by
// default) pays first; successes refill it, one a second at most, and a
// retry it paid for that succeeds gives its retry back. Then every request
// that succeeds deposits ratio tokens (0.25 by default), which expire over
// a 10-second window; they pay a busy Transport (one earning at least its
// reserve a second) while its retries work (the last second's failed
// retries at most twice its successful ones, plus the reserve) and no
// faster than the last second earned. An attempt that timed out
// (WithPerAttemptTimeout, or a timeout of the base) costs a token more, and
// its retry is paid by the reserve alone, since a server too slow to
// answer is likely still working on the request and a retry only joins its
// queue.
//
// By failure rate, at the default 3 attempts, with each attempt failing
// independently with probability p: a busy Transport retries every failure
// up to p = 20% and all but a few in a thousand at 30%, so about 1 − p³ of
// requests succeed (99.9%, 99.2%, 97.3% at 10, 20, 30%); a quiet one (a request a second) lives on its reserve and
// loses about p⁴ more (96.3% succeed at 30%). During an outage nothing
// succeeds: nothing is refunded or earned, each replica spends its reserve
// once and then stops, about 1.0 attempts a request however long the
// outage lasts; for N replicas, failed retries ≤ ratio × successes + N ×
// reserve. Only a retry or hedge that launches spends a token. A retry
// takes its token before its backoff sleep and gives it back if it then
// does not launch (the caller cancelled during the sleep, the breaker or
// the concurrency limit refused it); so with the budget empty a request
// ends at once instead of sleeping first (a 429 with Retry-After: 2 comes
// back immediately, not two seconds later). With the budget empty,
// attempts in flight continue and the last result is returned.
// WithRetryBudget(0, 0) turns the budget off. The exact bounds, and the
// simulation behind these figures, are in package resilience.
//
// # Chains of services
//
// A service that calls others through a Transport wraps its handler in
// [Middleware], makes its calls with the incoming request's context, and
// says who speaks gotry's hop protocol with it: the callers it believes
// ([WithTrustedCallers]) and the hosts it calls that are services of the
// chain ([WithHopPeers]):
//
//	internal := func(host string) bool { return strings.HasSuffix(host, ".internal") }
//	api := &http.Client{Transport: transport.New(nil, transport.WithHopPeers(internal))}
//	mesh := transport.CallersFrom(netip.MustParsePrefix("10.0.0.0/8")) // only if nothing else connects from there
//	http.ListenAndServe(addr, transport.Middleware(mux, transport.WithTrustedCallers(mesh)))
//
// Three headers then pass along a chain (client → A → B → leaf):
//
//   - [RetriesLeftHeader], on each attempt to a peer: what the sender will
//     do if the attempt fails (0 for a request it may not repeat, a body
//     it cannot send again, or its last attempt). A service whose trusted
//     caller will retry makes one attempt per call and passes the promise
//     on; on the caller's last attempt it retries as usual. So one layer
//     retries a failure at a time, and attempts add up rather than
//     multiply: with three attempts at every hop and no budget, the leaf
//     of a chain of three sees 7 attempts a request, not 27 (5 when A, the
//     edge, trusts no caller), as TestChainAttemptsAddUp counts.
//   - [TimeoutHeader], on each attempt to a peer whose request has a
//     deadline (or a per-attempt timeout): the time left, in milliseconds,
//     as gRPC's grpc-timeout. Middleware puts a trusted caller's time left
//     on the request's context (never extending a deadline it has), so the
//     calls below send theirs on, and no hop starts an attempt, retry or
//     hedge after the top caller's deadline; a trusted caller with less
//     than [MinHopTimeout] left is answered 504 at once. Through a chain of
//     three services with a 300 ms deadline, the leaf stalling or failing,
//     even behind a proxy that keeps a request running after its client
//     left, the latest attempt started at most 10 ms after the deadline, in
//     transit, in 256 runs under -race on two busy cores
//     (TestChainDeadlineFlowsDown). A Transport does not send an attempt to a
//     peer with less than MinHopTimeout left: it fails at once, with an error
//     matching context.DeadlineExceeded that the breaker does not count.
//   - [PushbackHeader], on a failed answer of a service whose calls below
//     retried (or met an open breaker). A Transport does not retry such an
//     answer from a peer, when the built-in rules judged it (a
//     [Classifier]'s own Retry or Throttled stands), and [WithPushback](false)
//     turns that off. It hides nothing: the answer counts as the failure it
//     is, for the breaker and the retry budget (a throttle stays a throttle,
//     which the breaker ignores), and it cancels no attempt in flight: a
//     hedge answered with pushback waits for the attempt it raced, which may
//     still succeed. The call's end reason is pushback.
//
// The defaults trust nobody, as Envoy strips its x-envoy-* headers from
// external requests: Middleware with no option ignores both request
// headers (and removes them from the request its handler sees, so a
// handler that forwards its headers cannot carry them inward), and a
// Transport with no peers sends no header of the protocol and honours no
// pushback, so a third-party API learns nothing of it and cannot stop a
// retry with it. No address tells a caller inside a system from a proxy
// relaying the internet to it (a load balancer, an ingress, a sidecar or an
// nginx on the same host connect from private or loopback addresses), so
// trust callers by address ([CallersFrom]) only where nothing untrusted can
// connect from it, or behind a proxy that removes Gotry-* headers from
// outside requests; otherwise trust on what such a proxy sets, or a client
// certificate. Even a trusted caller can only shorten its own request's
// deadline (what hanging up would do) and make the service retry less for
// it; a malformed, repeated or out-of-range value is ignored. With the
// defaults a chain behaves as without Middleware (27 leaf attempts, as
// above, with no budget): configure both ends.
//
// Failure modes: a service whose caller promised a retry, and which answers
// a failure below with a status the caller does not retry (a 500, by
// default, or a 200 with an error inside), breaks the chain's promise and
// nobody retries: answer with the status that came back, or 502, 503 or
// 504. A relative deadline does not count the time the request takes to
// arrive (a new connection's set-up included), so each hop's deadline falls
// a transit time after its caller's. A proxy between two hops that does not
// speak the protocol passes the caller's values on unchanged.
//
// # Circuit breaker
//
// [WithBreaker] keeps one breaker per host, configured by a
// [resilience.BreakerConfig] whose zero fields take their defaults. The host
// is req.URL.Host normalised so that every spelling of one server shares a
// breaker: lower case, an IPv6 literal in canonical form, and the scheme's
// default port dropped (example.test, EXAMPLE.test and example.test:80 are
// one breaker for http; example.test:8080 is another). That key is the one
// hooks report and [Transport.Stats] lists (HostStats.Key).
//
//   - Retryable results count as failures; non-retryable responses,
//     4xx included, as successes. Non-retryable errors without a response,
//     the caller's cancellation, cancelled hedge losers and results that
//     belong to an earlier state of the breaker are not counted.
//   - Neither is a throttle: a 429, a 503 whose Retry-After asks for a
//     wait (seconds above 0, or a date), or an answer a [Classifier]
//     marks [Throttled]. The server is alive and asking for less, which
//     Retry-After, the retry budget and the concurrency limit answer
//     (each counts it as the overload answer it is); a breaker that
//     opened on a burst of throttling would refuse every request for
//     OpenDuration (so Envoy's outlier detection keeps 429 out of its
//     consecutive-5xx count). A throttle neither adds to the consecutive
//     failures nor clears them, and a probe that meets one decides
//     nothing: the breaker stays half-open for the next request's probe.
//     A 503 without Retry-After, the answer of a proxy whose backend is
//     down, is a failure, and so is one with "Retry-After: 0", which asks
//     for no wait.
//   - FailureThreshold consecutive failures open a closed breaker. After
//     OpenDuration it is half-open and admits up to HalfOpenProbes requests
//     as probes: one success closes it, one failure opens it again. Other
//     requests fail at once with an error matching [ErrCircuitOpen].
//   - A probe gets exactly one attempt, and holds its slot until that
//     attempt ends, even if the breaker has opened again meanwhile; so give
//     requests a deadline or [WithPerAttemptTimeout] when the breaker is on.
//   - The breaker is asked before every attempt, after a backoff included.
//     If it opened during a request, no further attempt launches and the
//     transport gives up as below; ErrCircuitOpen is returned only when the
//     request itself was refused.
//   - State changes lazily: no timer and no goroutine per breaker. No hook
//     is called while a breaker's lock is held, so a state-change hook may
//     read Stats. Memory is bounded by [WithMaxKeys]; an open breaker is
//     never evicted before its OpenDuration ends, and a new host that finds
//     no room is served untracked (Stats.UntrackedAdmissions).
//
// # Overload: the concurrency limit
//
// [WithConcurrencyLimit] keeps an adaptive limit per host on the attempts
// in flight to it, learned from its latency and its overload answers (503,
// 429, per-attempt timeouts); [resilience.ConcurrencyLimit] gives the
// model. Turn it on in front of a downstream that can be overloaded: when
// its capacity drops, the requests it can still answer in time keep being
// answered, at about its capacity, and the excess fails at once, locally,
// instead of every request queueing there until it times out (and the
// retries of those timeouts adding to the queue). It cuts from what is in
// flight when overload answers come back, so it works as well in each of
// many replicas sharing a downstream as in one client that holds all of
// it. Below the downstream's capacity it sheds next to nothing.
//
//   - A request over the limit waits briefly for a permit (MaxWait, never
//     past its deadline), then is shed: RoundTrip returns an error
//     matching [resilience.ErrOverloaded] (an *[resilience.OverloadError]
//     naming the limit and what was in flight), nothing is sent, the body
//     is closed, and the give-up reason is "overloaded". Nothing of the
//     request is read before the permit is granted.
//   - Retries and hedges need a permit too and never wait: a hedge that
//     finds none is not sent; a retry that finds none ends the request with
//     the answer it had, as an exhausted budget does.
//   - Policy.Criticality orders requests (sheddable ones are shed once
//     three quarters of the limit, rounded up, is in use; critical ones
//     wait ahead of the rest and take a default one's place in a full
//     queue); Policy.NoLimit exempts one.
//   - [Transport.Stats] gives each host's limit, in-flight count and
//     sheds; OnShed and OnLimitWait fire for each shed and each wait, and
//     package telemetry turns them into gauges, a counter, span events and
//     log lines.
//
// # Giving up
//
// When attempts, the budget, a Retry-After limit, the deadline or the
// breaker stop the transport with no winner, RoundTrip returns:
//
//   - the most recent retryable response, with a nil error, so the caller
//     sees the real status and body. If a later attempt had superseded it,
//     it is the copy kept in memory: same status and headers and exactly the
//     bytes that were kept; when its body was longer than
//     [WithMaxRetainedBody] (or could not be read within the second), the
//     body yields those bytes and then an error matching [ErrBodyTruncated],
//     never a short, silent EOF;
//   - otherwise the last attempt's error. When more than one attempt ran it
//     is an [*Error] (Attempts, Err, Errs, Omitted, Reason) whose Unwrap
//     lets errors.Is and errors.As reach the attempts' errors; it keeps the
//     errors of the first four and the four most recent attempts, whatever
//     MaxAttempts is. One attempt's error is returned as it is.
//
// When the caller's context ends, its error is returned directly. Error's
// Reason, a [resilience.EndReason], says why the transport stopped
// (attempts_exhausted, budget_exhausted, circuit_open,
// retry_after_too_long, past_deadline, not_idempotent, body_not_replayable,
// canceled). A request without a URL gets an error, as with
// http.Transport, and a base that returns neither a response nor an error
// gets [ErrNilResponse], never a panic.
//
// # Per-request policy
//
// [WithPolicy] attaches a [Policy] to a request's context. It follows the
// rule of every configuration struct of gotry (see package resilience):
// its zero fields take their defaults, here the transport's settings, and
// resilience.Off turns off what the transport has on. [NoRetry] is
// Policy{MaxAttempts: 1, MaxHedges: resilience.Off}: one attempt, no hedge.
// Policy{MaxHedges: resilience.Off} turns only hedging off. The budget,
// breakers and hooks are transport-wide and cannot be overridden per
// request.
//
// Under an SDK the Policy goes on the context the SDK operation is called
// with: SDKs build their requests with the caller's context, so the
// operation's attempts get it (an S3 upload a longer timeout than the
// transport's, say: see below).
//
// # Timeouts
//
// Three limits bound a request, each from another start:
//
//   - the caller's deadline (the request's context) bounds the whole
//     request, retries and backoff included; when it passes, the request
//     ends and is not retried, and no retry or hedge starts at or after it
//     (even when a sleep's timer wakes late);
//   - [WithPerAttemptTimeout] (Policy.PerAttemptTimeout) bounds each
//     attempt from its start to its response headers: the upload of the
//     request body counts;
//   - [WithPerAttemptHeaderTimeout] (Policy.PerAttemptHeaderTimeout)
//     bounds each attempt from the moment its server may have the whole
//     request (the end of its write, body included, plus the time the
//     bytes queued on a slow link need to arrive: see below) to its
//     response headers, as net/http's Transport.ResponseHeaderTimeout
//     does from the write, but per attempt, per request through a Policy,
//     and as a per-attempt timeout to the retry rules.
//
// Use the per-attempt timeout when requests are small and the time to the
// answer is what matters (reads, RPC-like calls): it also bounds a stalled
// connection or a slow upload. Use the header timeout when requests carry
// large bodies over links of unknown speed (uploads, object stores): an 8
// MiB PUT over a 2,000 KB/s link takes four seconds to arrive, and a
// per-attempt timeout below that cuts off every attempt although the
// server answers at once; the header timeout lets the upload take what it
// takes and still cuts off a server that has the request and does not
// answer. Both may be set: the first to expire ends the attempt; set the
// per-attempt timeout well above the longest upload then, or per request.
// Neither cuts off a response body being read: bound that with the
// caller's deadline. An attempt cut off by either matches
// [ErrAttemptTimeout], is retried (when the request is eligible) and
// counts as a timeout for the budget and the concurrency limit.
//
// The end of the write is not the server's receipt: the write ends when
// the body's last byte has entered the client's socket, and over a slow
// link the socket has by then taken megabytes ahead of the link, into the
// buffers between the two hosts. The header timeout waits for them: once
// the buffers are full the socket takes bytes at the link's rate, so the
// body's reads show that rate, and the bytes read ahead of it need their
// number over the rate to drain; the wait starts that much after the
// write, never more than the upload took. Measured through a proxy on
// loopback that carries 2,000 KB/s from client to server (go test -race
// -count=1 -run 'SlowLink' ./transport/, on a loaded 2-core machine): an 8
// MiB PUT's write ended about 3 s after its first byte, and the server had
// the body 1.5 to 2.5 s after that. Timed from the write, a 1 s header
// timeout cut off every attempt before the server had the body (two
// attempts, after which the retry budget refused a third: the request
// failed after about 8 s); timed from the estimated drain, the first
// attempt got the server's answer, sent 300 ms after the body, in 4.6 to
// 6.0 s in all. A server that had the body and never answered was cut off
// 0.85 to 1.3 s after it had it, the error saying how long the drain was
// allowed. The estimate needs an upload that outlasts the buffers: a body
// they take at once (on Linux up to about 4 MiB, or any body over
// loopback) shows no rate and gets no extension, so its drain (2 s for 4
// MiB at 2,000 KB/s) counts against the timeout: size it for that.
//
// # Hooks
//
// [WithHooks] installs a [Hooks] value, which is [resilience.Hooks]: the
// same type the Retrier uses, so one hook set, and one telemetry adapter,
// serves both. Several WithHooks options combine; none replaces another.
// Every field is optional and a nil one costs nothing. Each event embeds
// [resilience.Event] with the request's context (or the attempt's, for
// attempt events), the breaker key (the normalised host) and the subject;
// [RequestOf] returns the caller's request, which hooks must not modify,
// [HeaderOf] an attempt's own header copy (free to modify: trace context
// goes there) and [ResponseOf] an ended attempt's response.
//
// Hooks run synchronously, so keep them fast: on the caller's goroutine
// until a hedge fires, then on the goroutine driving the request (a hedge's
// OnAttemptStart on the hedge's own goroutine, and a loser's OnAttemptEnd
// possibly after RoundTrip has returned). No hook is called with a lock
// held, and a panicking hook is not recovered. OnCallEnd fires when
// RoundTrip returns; OnResultDone when the returned body is closed or read
// to the end (at once for http.NoBody).
//
// [WithAttemptHeader] lets the server see retries: every attempt carries a
// header, named by you, saying which attempt it is and why it was sent
// ("1; initial", "2; retry", "3; hedge"), as Envoy's x-envoy-attempt-count
// does.
//
// # Under SDKs and other clients
//
// The transport goes under any client that takes an http.RoundTripper or an
// *http.Client, and decides per request, as for any caller.
//
//   - A request is retried when it is idempotent: GET, HEAD, OPTIONS,
//     TRACE, PUT, DELETE, or any method with an Idempotency-Key or
//     X-Idempotency-Key entry, including one with no value
//     (req.Header["Idempotency-Key"] = nil), which net/http documents as
//     marking a request idempotent without sending the header. Prometheus'
//     API client marks its POST queries this way, so they are retried.
//   - Other POSTs are sent once: OTLP exports, most AWS API calls, remote
//     write, a Kubernetes create. [WithNonIdempotentRetries], or
//     Policy.RetryNonIdempotent through [WithPolicy], allows repeating them.
//   - An SDK's own retries are new requests here. When both layers retry,
//     attempts multiply (up to MaxAttempts × the SDK's attempts); the
//     budget only refuses this transport's retries. Which layer should
//     retry depends on the SDK. One that knows its service's errors, the
//     POSTs it may resend and how to replay large bodies keeps retrying,
//     over a transport of its own with WithMaxAttempts(1) that adds the
//     breaker, the limit and telemetry of every physical attempt: the AWS
//     SDK for Go v2 and Kubernetes client-go are such SDKs. A Policy on the
//     context of an SDK call reaches each of its attempts (a per-attempt
//     timeout or a hedge for reads).
//   - AWS SDK for Go v2: with its retries off and this transport retrying,
//     S3 writes are lost on one fault: a 500 InternalError (S3 asks for a
//     retry; 500 is not a default retryable status), a SlowDown on
//     CreateMultipartUpload or CompleteMultipartUpload (POSTs), a SlowDown
//     on any body over MaxBufferedBody (every 5 MiB part). Keep the SDK's
//     retryer, tell it this transport's breaker and limit refusals are
//     final, and give reads a hedge and a per-attempt timeout through the
//     operation's context, never writes (it counts upload time). With
//     AWS_CA_BUNDLE set, config.LoadDefaultConfig fails on any wrapped
//     client passed with config.WithHTTPClient ("has no
//     WithTransportOptions"): load the config first and set cfg.HTTPClient
//     to a client over this transport over the SDK's own *http.Transport,
//     which carries the bundle.
//   - Kubernetes client-go resends any verb, POST included, on a 429 or 5xx
//     with Retry-After (up to 10 times), and its typed clients cannot turn
//     that off; rest.Config.Wrap puts this transport under its QPS limiter,
//     so this transport's retries are not rate limited, only bounded by its
//     budget, which does not refuse retries that succeed (measured: 40
//     Gets at QPS 20, each first answered 503, reached the server as 80
//     requests, 40 a second). Send each of its requests once here, with
//     the breaker (client-go does not retry past it) and a classifier
//     that leaves 429 to client-go; if you let this transport retry, only
//     GETs: a repeated update fails with 409 and a repeated delete with
//     404.
//   - Both set-ups are modules of their own, which a program requires
//     beside this one, each held by tests with injected faults and
//     documented with the attempts per operation they measured:
//     github.com/MrVSiK/gotry/contrib/awssdk (awssdk.S3Transport and
//     awssdk.S3Retryer; tests against S3 in gofakes3) and
//     github.com/MrVSiK/gotry/contrib/kubernetes (kubernetes.Wrap, for
//     rest.Config.Wrap; tests against a Kubernetes API server).
//   - OTLP/HTTP exporters: the safe setup is the exporter's retries off
//     (otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})),
//     a transport of its own with WithNonIdempotentRetries(true) and
//     WithPerAttemptTimeout, and, if it carries gotry's telemetry, a
//     telemetry.New(telemetry.WithTracerProvider(noop.NewTracerProvider()))
//     of its own: telemetry on an exporter's transport that exports through
//     the same provider traces its own exports, for ever. See the
//     OtlpExporter example. A resend after a connection was lost
//     mid-request may duplicate spans, which OTLP allows.
//   - Never give an SDK a static idempotency-key header: every request
//     would carry the same key and a deduplicating server would drop all
//     but the first. Set a fresh key (or a nil entry) per request in a
//     RoundTripper over this one.
//   - MaxAttempts bounds this transport's attempts, not what http.Transport
//     sends within one: it resends an idempotent request once on a new
//     connection when a reused one breaks before the response, so a
//     server may see up to twice MaxAttempts arrivals.
//   - HTTP/2: the errors net/http's HTTP/2 client returns for a lost
//     connection ("http2: client connection lost" and two others, an
//     exact list) are retried, and so are stream resets and refusals (see
//     What is retried); these untyped errors, and the unexported types of
//     the stream errors, are the one exception to classifying errors by
//     exported type. Without a health check a stalled connection stays
//     pooled, and retries after per-attempt timeouts go back onto it: set
//     http.Transport.HTTP2 = &http.HTTP2Config{SendPingTimeout: ...,
//     PingTimeout: ...} and allow enough attempts to outlast it.
//   - After per-attempt timeouts the error matches both [ErrAttemptTimeout]
//     and context.DeadlineExceeded; test ErrAttemptTimeout first to tell it
//     from the caller's own deadline, which matches only the latter.
//
// # Testing code that uses gotry
//
// Package [github.com/MrVSiK/gotry/transport/transporttest] is a scripted
// RoundTripper to put under a Transport in tests: each attempt gets the
// next step of a script (a status with headers and a body, an error such
// as a reset connection, a latency, a hang), and every attempt is
// recorded, so a test asserts how many attempts gotry made and what they
// carried. Drive gotry's timing in one of two ways, never by sleeping:
//
//   - A fake clock: give one [clock.Fake] to [WithClock] and to the kit
//     (transporttest.WithClock), start the call on a goroutine, wait until
//     the timers you expect are armed (Fake.WaitForTimers, WaitForArmed)
//     and move the time on (Fake.Advance). Every wait of gotry's runs on
//     that clock: backoff and Retry-After sleeps, hedge delays, per-attempt
//     and header timeouts, the breaker's open period, the budget's windows,
//     the limit's wait. The test says exactly which moment it reaches; it
//     must know how many timers (gotry's and the kit's latencies) are armed
//     before it advances.
//   - testing/synctest: leave the wall clock in place and run the test in
//     synctest.Test. In the bubble the wall clock is the bubble's, and time
//     moves as soon as every goroutine in it is blocked, at once and
//     exactly: a 2s backoff takes no real time, and time.Since measures
//     exactly 2s. Nothing to count; but make the Transport (and its base)
//     inside the bubble and use it only there (its pooled timers and
//     per-host state belong to the bubble that made them; another bubble,
//     or the code outside, must make its own), and give it an in-memory
//     base such as the kit: time does not move while a goroutine waits on
//     the network, and http.Transport's connections keep goroutines that
//     the bubble waits for. Transports made outside any bubble in the same
//     test binary are unaffected.
//
// Either way the transport runs the same code as in production. The kit's
// examples show both a test asserting attempts and the fake clock;
// TestGotryInsideAndOutsideSynctestBubbles, in the kit, runs a transport
// with retries, hedging, the breaker and the limit in bubbles and out.
//
// # Promises
//
//   - A non-idempotent request is processed at most once unless you allow
//     more (Idempotency-Key, WithNonIdempotentRetries,
//     Policy.RetryNonIdempotent): it is sent once, and sent again only when
//     an HTTP/2 server refused it unprocessed (REFUSED_STREAM, GOAWAY).
//   - At most WithMaxBufferedBody's bytes (DefaultMaxBufferedBody unless
//     set) of a body are buffered (plus one byte that shows it is larger),
//     every attempt sends exactly the caller's bytes, and the caller's body
//     is always closed.
//   - A Retry-After wait is never negative, never longer than
//     WithMaxRetryAfter and ends before the request's deadline; no retry
//     or hedge starts at or after that deadline.
//   - The package writes nothing: no logger, no stdout or stderr, and its
//     errors never repeat request headers or bodies.
//   - Retries and hedges together never exceed MaxAttempts; every response
//     body the transport receives is closed, losers included; no goroutine
//     outlives a request; per-host memory is bounded by WithMaxKeys.
//
// # Usage notes
//
//   - Always close the response body: after retries ran out you may get a
//     real 5xx with a nil error.
//   - Put a deadline on every request (or a per-attempt timeout): without
//     one a hung attempt blocks the request, and a hung probe holds its
//     breaker slot.
//   - Hedging adds load on the slow path. Use it for cheap idempotent reads,
//     with a delay near the downstream's p95, and keep the budget on.
//   - [Transport.CloseIdleConnections] forwards to the base when it has that
//     method, so http.Client.CloseIdleConnections works through gotry.
//
// The package imports only the standard library.
package transport
