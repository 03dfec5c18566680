package telemetry

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/MrVSiK/gotry/resilience"
)

// The attribute keys to filter on: the labels of gotry's metrics, the
// request span's counts, error.type, the attributes of the overload events
// and the boolean markers of attempt and backoff spans. OpenTelemetry has no convention for retries,
// hedges, budgets or breakers, so these are invented here and start with
// "gotry."; the HTTP, server, url and error attributes are the
// OpenTelemetry semantic conventions' (semconv v1.43.0: use its keys, e.g.
// semconv.ServerAddressKey). Spans, metrics and log fields use the same
// keys, so the three join; the package's README.md and METRICS.md list
// every attribute and field, these included.
const (
	// KeyOperation (invented) names a generic Retrier call: its key. It
	// replaces the HTTP attributes on everything recorded for a Retrier's
	// calls.
	KeyOperation = attribute.Key("gotry.operation")
	// KeyTransport (invented) is the name a transport or retrier was wired
	// with (Name), on every one of its metrics.
	KeyTransport = attribute.Key("gotry.transport")

	// KeyAttempts (invented, request span) is how many attempts launched,
	// retries and hedges included.
	KeyAttempts = attribute.Key("gotry.attempts")
	// KeyRetries (invented, request span) is how many of them were retries;
	// on the span only when not zero.
	KeyRetries = attribute.Key("gotry.retries")
	// KeyHedges (invented, request span) is how many of them were hedges;
	// on the span only when not zero.
	KeyHedges = attribute.Key("gotry.hedges")
	// KeyReason (invented) is why the request ended: resilience.EndReason's
	// String, e.g. "success" or "attempts_exhausted".
	KeyReason = attribute.Key("gotry.reason")

	// KeyAttemptKind (invented) is "initial", "retry" or "hedge". An HTTP
	// attempt span carries it only on a resend, with
	// http.request.resend_count: a span without it is the first attempt.
	// Metrics and logs always carry it.
	KeyAttemptKind = attribute.Key("gotry.attempt.kind")
	// KeyAttemptOutcome (invented) is "success", "retryable", "failure" or
	// "cancelled" (lost a hedge race or the caller gave up; not an error).
	KeyAttemptOutcome = attribute.Key("gotry.attempt.outcome")

	// KeyRetryTrigger (invented) is what made a retry: "429", "5xx", "4xx"
	// for a status, or the error's ErrorType.
	KeyRetryTrigger = attribute.Key("gotry.retry.trigger")
	// KeyDelaySource (invented) is where a retry's delay came from:
	// "backoff", "retry_after" or "immediate" (no wait).
	KeyDelaySource = attribute.Key("gotry.retry.delay_source")
	// KeyHedgeTrigger (invented) is what set a hedge's delay: "fixed" (a
	// configured delay) or "adaptive" (WithAdaptiveHedging's learned one).
	KeyHedgeTrigger = attribute.Key("gotry.hedge.trigger")

	// KeyBreakerState (invented) is a breaker's state: "closed", "open" or
	// "half-open".
	KeyBreakerState = attribute.Key("gotry.breaker.state")
	// KeyBreakerFrom and KeyBreakerTo (invented) are a transition's states.
	KeyBreakerFrom = attribute.Key("gotry.breaker.from")
	KeyBreakerTo   = attribute.Key("gotry.breaker.to")

	// KeyCriticality (invented) is a request's criticality under the
	// concurrency limit (resilience.Criticality's String): "sheddable",
	// "default" or "critical". On gotry.limit.shed, and on the shed and
	// wait span events and log lines.
	KeyCriticality = attribute.Key("gotry.criticality")
	// KeyLimitCurrent (invented; EventLimitShed, EventLimitWait and their
	// log lines) is the host's concurrency limit when an attempt was shed
	// or got its permit after waiting. The gauge MetricLimitCurrent, of the
	// same name, reports it over time: the two are distinct constants, one
	// an attribute key and one a metric name.
	KeyLimitCurrent = attribute.Key("gotry.limit.current")
	// KeyLimitInFlight (invented; the same events and lines) is the
	// attempts in flight to the host under its limit then.
	KeyLimitInFlight = attribute.Key("gotry.limit.in_flight")
	// KeyLimitWaited (invented; the same events and lines) is how long, in
	// seconds (float), the attempt waited for a permit (0 when it did not
	// wait).
	KeyLimitWaited = attribute.Key("gotry.limit.waited")

	// KeyAttemptProbe (invented, attempt spans and logs) is true on a
	// half-open breaker's probe; absent otherwise.
	KeyAttemptProbe = attribute.Key("gotry.attempt.probe")
	// KeyAttemptPushback (invented, attempt spans and logs) is true on an
	// attempt whose answer carried the hop protocol's pushback
	// (transport.PushbackHeader) from a peer and was not retried for it:
	// the call made no further attempt (resilience.Verdict.Pushback);
	// absent otherwise. The request then ends with gotry.reason "pushback"
	// unless an attempt still in flight answers.
	KeyAttemptPushback = attribute.Key("gotry.attempt.pushback")
	// KeyBackoffRetryAfter (invented, backoff span) is true when the
	// sleep's delay came from the server's Retry-After header.
	KeyBackoffRetryAfter = attribute.Key("gotry.backoff.retry_after")
	// KeyBackoffInterrupted (invented, backoff span) is true when the
	// caller's context ended during the sleep.
	KeyBackoffInterrupted = attribute.Key("gotry.backoff.interrupted")

	// KeyErrorType is the conventions' error.type (semconv.ErrorTypeKey,
	// the same key, not an invented one), exported here because its
	// values are gotry's: the status code for a response >= 400 (as the
	// HTTP conventions say), else the error's class (ErrorType, the
	// ErrorType* constants). On request and attempt spans, metrics and
	// log lines.
	KeyErrorType = semconv.ErrorTypeKey
)

// The other attribute keys, which only describe: the conventions' (under
// shorter names), and gotry's own that carry a number or a detail rather
// than a dimension to filter by.
const (
	// keyMethod is http.request.method: the request method, or "_OTHER" for
	// a method the conventions do not know.
	keyMethod = semconv.HTTPRequestMethodKey
	// keyMethodOriginal is http.request.method_original, on spans only, when
	// keyMethod is "_OTHER".
	keyMethodOriginal = semconv.HTTPRequestMethodOriginalKey
	// keyServerAddress is server.address: the URL's host, without the port.
	keyServerAddress = semconv.ServerAddressKey
	// keyServerPort is server.port: the URL's port, or the scheme's default.
	keyServerPort = semconv.ServerPortKey
	// keyURLFull is url.full, on attempt spans only: credentials replaced by
	// "REDACTED:REDACTED", the values of the query parameters the
	// conventions name as sensitive replaced by "REDACTED" (or the whole
	// query dropped, WithoutURLQuery), no fragment.
	keyURLFull = semconv.URLFullKey
	// keyStatusCode is http.response.status_code.
	keyStatusCode = semconv.HTTPResponseStatusCodeKey
	// keyProtocolVersion is network.protocol.version, on attempt spans: the
	// response's HTTP version ("1.1", "2", "3").
	keyProtocolVersion = semconv.NetworkProtocolVersionKey
	// keyResendCount is http.request.resend_count: attempt number - 1, set
	// only on resent attempts (retries and hedges).
	keyResendCount = semconv.HTTPRequestResendCountKey

	// keyBackoffTotal (invented, request span) is the seconds slept between
	// attempts, as a float; on the span only when not zero.
	keyBackoffTotal = attribute.Key("gotry.backoff.total")
	// keyTimeLeft (invented, request span) is the seconds that were left
	// of the request context's deadline when the request started, as a
	// float: under transport.Middleware, the deadline a trusted caller
	// propagated (transport.TimeoutHeader) included. Absent without a
	// deadline. The histogram MetricRequestTimeLeft, of the same name,
	// records the same value per request.
	keyTimeLeft = attribute.Key("gotry.request.time_left")
	// keyRequestDuration (invented, logs only) is the request's seconds.
	keyRequestDuration = attribute.Key("gotry.request.duration")
	// keyAttempt (invented, span events and logs; never a metric label) is
	// an attempt's 1-based number.
	keyAttempt = attribute.Key("gotry.attempt")
	// keyAttemptTimeToHeaders (invented, attempt spans) is the seconds from
	// the attempt's start to its response headers, as a float; absent when
	// the attempt ended without a response.
	keyAttemptTimeToHeaders = attribute.Key("gotry.attempt.time_to_headers")
	// keyAttemptDuration (invented, logs only) is the attempt's seconds until
	// response headers or an error.
	keyAttemptDuration = attribute.Key("gotry.attempt.duration")
	// keyBackoffDelay (invented) is a planned backoff in seconds (float).
	keyBackoffDelay = attribute.Key("gotry.backoff.delay")
	// keyHedgeInFlight (invented, span event and logs) is how many attempts
	// were in flight when a hedge launched, the hedge included.
	keyHedgeInFlight = attribute.Key("gotry.hedge.in_flight")
	// keyHedgeDelay (invented, hedge span event) is the wait in seconds
	// (float) after which the hedge launched: the fixed delay, or the one
	// adaptive hedging had learned for the host.
	keyHedgeDelay = attribute.Key("gotry.hedge.delay")
	// keySuppressed (invented, logs only) is how many like lines the rate
	// limiter dropped since the previous one.
	keySuppressed = attribute.Key("gotry.suppressed")
)

// Values of KeyDelaySource.
const (
	DelayBackoff    = "backoff"
	DelayRetryAfter = "retry_after"
	DelayImmediate  = "immediate"
)

// OtherHost is the server.address of metrics for hosts past the host limit.
const OtherHost = "other"

// delaySource names where a retry's delay came from.
func delaySource(d float64, retryAfter bool) string {
	switch {
	case retryAfter:
		return DelayRetryAfter
	case d > 0:
		return DelayBackoff
	}
	return DelayImmediate
}

// retryTrigger is the low-cardinality cause of a retry: a status class, or
// the error's type.
func retryTrigger(code int, err error) string {
	switch {
	case code == http.StatusTooManyRequests:
		return "429"
	case code >= 500 && code < 600:
		return "5xx"
	case code >= 400 && code < 500:
		return "4xx"
	case err != nil:
		return ErrorType(err)
	}
	return ErrorTypeOther
}

// statusErrorType is error.type for a status code: the code for >= 400 (as
// the HTTP conventions say), "" otherwise.
func statusErrorType(code int) string {
	if code >= 400 {
		return strconv.Itoa(code)
	}
	return ""
}

// resultErrorType is error.type for a result: the error's class, else the
// status's, else "".
func resultErrorType(code int, err error) string {
	if err != nil {
		return ErrorType(err)
	}
	return statusErrorType(code)
}

// method returns the conventions' http.request.method for m ("_OTHER" for an
// unknown method) and, for the request and attempt spans, their names. The
// strings are constants, so a known method costs no allocation.
func method(m string) (name, requestSpan, attemptSpan string) {
	switch m {
	case "", http.MethodGet:
		return http.MethodGet, "gotry GET", "GET"
	case http.MethodHead:
		return m, "gotry HEAD", m
	case http.MethodPost:
		return m, "gotry POST", m
	case http.MethodPut:
		return m, "gotry PUT", m
	case http.MethodPatch:
		return m, "gotry PATCH", m
	case http.MethodDelete:
		return m, "gotry DELETE", m
	case http.MethodOptions:
		return m, "gotry OPTIONS", m
	case http.MethodConnect:
		return m, "gotry CONNECT", m
	case http.MethodTrace:
		return m, "gotry TRACE", m
	case "QUERY":
		return m, "gotry QUERY", m
	}
	// The conventions name a span of an unknown method "HTTP".
	return "_OTHER", "gotry HTTP", "HTTP"
}

// hostPort splits a URL host ("h", "h:p", "[::1]:p") into server.address
// and server.port, defaulting the port from the scheme (0 when unknown).
func hostPort(u *url.URL) (string, int) {
	if u == nil {
		return "", 0
	}
	host := lowerHost(u.Hostname())
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err == nil {
			return host, n
		}
		return host, 0
	}
	switch u.Scheme {
	case "https":
		return host, 443
	case "http":
		return host, 80
	}
	return host, 0
}

// splitKey splits a breaker key (the transport's normalised host: lower
// case, an IPv6 literal in brackets, the scheme's default port dropped) into
// the same server.address as hostPort gives for the request (no brackets),
// and its port (0 when the key names none).
func splitKey(key string) (string, int) {
	host, p, err := net.SplitHostPort(key)
	if err != nil {
		return lowerHost(strings.TrimSuffix(strings.TrimPrefix(key, "["), "]")), 0
	}
	n, _ := strconv.Atoi(p)
	return lowerHost(host), n
}

// lowerHost lower-cases a host name, as the breaker keys are, without
// allocating when it already is.
func lowerHost(h string) string {
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// fullURL is url.full as the conventions want it: credentials replaced by
// "REDACTED:REDACTED", the query kept with the values of sensitive
// parameters replaced by "REDACTED" (or dropped whole with dropQuery), and
// no fragment (never sent over HTTP; it may hold a client-side token).
func fullURL(u *url.URL, dropQuery bool) string {
	if u == nil {
		return ""
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User != nil {
		c.User = url.UserPassword(redacted, redacted)
	}
	if !dropQuery {
		c.RawQuery = redactQuery(u.RawQuery)
	}
	return c.String()
}

// redacted replaces what url.full must not show.
const redacted = "REDACTED"

// sensitiveQuery holds the query parameters whose values url.full redacts,
// matched case-sensitively as the conventions say: the list of the HTTP
// conventions' url.full note (semconv v1.43.0: the AWS SigV4, Azure SAS and
// Google signed-URL parameters) plus AWSAccessKeyId and Signature, the
// AWS SigV2 parameters that the note listed before.
var sensitiveQuery = map[string]bool{
	"X-Amz-Signature":      true,
	"X-Amz-Credential":     true,
	"X-Amz-Security-Token": true,
	"sig":                  true,
	"X-Goog-Signature":     true,
	"AWSAccessKeyId":       true,
	"Signature":            true,
}

// redactQuery returns q with the value of every sensitive parameter replaced
// by "REDACTED", keeping the keys, the other parameters and their order. It
// allocates only when there is something to redact.
func redactQuery(q string) string {
	if q == "" {
		return ""
	}
	var b strings.Builder
	rest, done := q, 0 // done: the prefix of q already copied into b
	for i := 0; rest != ""; {
		part, next, _ := strings.Cut(rest, "&")
		key, _, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); err == nil && sensitiveQuery[k] {
			if b.Len() == 0 {
				b.Grow(len(q))
			}
			b.WriteString(q[done:i])
			b.WriteString(key)
			b.WriteString("=" + redacted)
			done = i + len(part)
		}
		i += len(part) + 1
		rest = next
	}
	if done == 0 {
		return q
	}
	b.WriteString(q[done:])
	return b.String()
}

// protocolVersion is network.protocol.version for resp: "1.0", "1.1", "2"
// or "3" from its ProtoMajor and ProtoMinor, "" when they are unset.
func protocolVersion(resp *http.Response) string {
	switch {
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 1:
		return "1.1"
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 0:
		return "1.0"
	case resp.ProtoMajor == 2:
		return "2"
	case resp.ProtoMajor == 3:
		return "3"
	case resp.ProtoMajor <= 0:
		return ""
	}
	return strconv.Itoa(resp.ProtoMajor) + "." + strconv.Itoa(resp.ProtoMinor)
}

// breakerState names s as the metrics and logs do.
func breakerState(s resilience.BreakerState) string { return s.String() }

// hostGuard maps hosts to their metric server.address, bounding how many
// distinct values it hands out. Safe for concurrent use; a host seen before
// costs one sync.Map load.
type hostGuard struct {
	label func(string) string // nil: the host itself
	limit int                 // <= 0: unbounded

	seen sync.Map // label -> struct{}; read without mu

	mu    sync.Mutex // serializes admissions so count never passes limit
	count int        // entries in seen; guarded by mu
}

// get returns the label for host and whether it is the real one (false when
// it was folded into OtherHost).
func (g *hostGuard) get(host string) (string, bool) {
	if g.label != nil {
		host = g.label(host)
	}
	if g.limit <= 0 {
		return host, true
	}
	if _, ok := g.seen.Load(host); ok {
		return host, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.seen.Load(host); ok {
		return host, true
	}
	if g.count >= g.limit {
		return OtherHost, false
	}
	g.seen.Store(host, struct{}{})
	g.count++
	return host, true
}
