package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// Attempt is one finished attempt, as a Classifier sees it. Request is the
// caller's original request (do not modify it); exactly one of Response and
// Err is set. Number is 1 for the first attempt.
type Attempt struct {
	Request  *http.Request
	Response *http.Response
	Err      error
	Number   int
}

// Decision is a classifier's verdict on an attempt.
type Decision int

// Decisions.
const (
	// Default defers to the built-in rules (DefaultClassifier, with the
	// transport's retryable statuses).
	Default Decision = iota
	// Retry marks the attempt retryable.
	Retry
	// DontRetry marks the attempt final.
	DontRetry
	// Throttled marks the attempt retryable and a throttle: the server is
	// alive and asked for less (resilience.Verdict.Throttle). The breaker
	// does not count it, neither as a failure nor as a success; the
	// concurrency limit counts it as congestion and the retry budget as a
	// failure, as any 429 or 503; and its Retry-After is honoured whatever
	// its status. The built-in rules return it for a 429, and for a 503
	// whose Retry-After asks for a wait; return it for a service's own
	// throttling answers (contrib/awssdk's S3Classifier does for S3's 503
	// SlowDown, which carries no Retry-After). For an error without a
	// response it is Retry: only an answer is a throttle.
	Throttled
)

// String returns "default", "retry", "dont-retry" or "throttled", and
// "Decision(n)" for a value outside them.
func (d Decision) String() string {
	switch d {
	case Default:
		return "default"
	case Retry:
		return "retry"
	case DontRetry:
		return "dont-retry"
	case Throttled:
		return "throttled"
	}
	return "Decision(" + strconv.Itoa(int(d)) + ")"
}

// Classifier decides whether an attempt is retryable, and may mark it a
// throttle (Throttled). It may be called concurrently (hedged attempts
// finish on their own goroutines) and must not read the response body.
//
// Whatever it decides, a 429, or a 503 whose Retry-After asks for a wait
// (seconds above 0, or a date), is a throttle: the server, alive, asking
// this client for less. The breaker ignores a throttle, as Envoy's
// outlier detection keeps 429 out of its consecutive-5xx count:
// Retry-After, the retry budget and the concurrency limit are what slow a
// client down, and a breaker that opened on a burst of throttling would
// refuse every request for its OpenDuration. A 503 without Retry-After is
// no throttle: a proxy answers so for a backend that is down, and the
// breaker counts it (when it is retryable) as the failure it may be; nor
// is one with "Retry-After: 0", which asks for no wait.
type Classifier func(Attempt) Decision

// defaultStatuses are retried unless WithRetryableStatuses replaces them; 429
// is always retryable.
var defaultStatuses = statusSet{}.with(http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout)

// statusSet is a bitmap of retryable status codes 100..599.
type statusSet [10]uint64

func (s statusSet) with(codes ...int) statusSet {
	for _, c := range codes {
		s[c/64] |= 1 << (c % 64)
	}
	return s
}

func (s *statusSet) has(code int) bool {
	if code < 0 || code >= 640 {
		return false
	}
	return s[code/64]&(1<<(code%64)) != 0
}

// DefaultClassifier is the built-in rule set, with the default retryable
// statuses (502, 503, 504 and 429). It returns Retry, DontRetry or, for a
// 429 and for a 503 whose Retry-After asks for a wait, Throttled; never
// Default. See decide for the rules.
func DefaultClassifier(a Attempt) Decision {
	s := defaultStatuses
	return decide(a, &s)
}

// decide applies the built-in rules with the given retryable statuses: an
// error by its class, a response by its status, a throttle (see
// throttling) among the retryable ones marked Throttled.
func decide(a Attempt, statuses *statusSet) Decision {
	if a.Err != nil {
		if ClassifyError(a.Err).Retryable() {
			return Retry
		}
		return DontRetry
	}
	if a.Response == nil {
		return DontRetry
	}
	if c := a.Response.StatusCode; c == http.StatusTooManyRequests || statuses.has(c) {
		if throttling(a.Response) {
			return Throttled
		}
		return Retry
	}
	return DontRetry
}

// throttling reports whether resp is the server asking for less, whatever
// a classifier decided of it: a 429, or a 503 whose Retry-After asks for a
// wait. A proxy that answers 503 for a dead backend sends no Retry-After;
// one that does not parse is no promise; and "Retry-After: 0" asks for no
// wait (retry at once: a transient failure's answer, not a throttle's).
// An HTTP date counts as asking for one, whatever the clock says (it is
// read against the zero time): a server sends one in its future.
func throttling(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusServiceUnavailable:
		d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Time{})
		return ok && d > 0
	}
	return false
}

// ErrorClass is the class of an attempt's error. It is gotry's one
// taxonomy of errors: the built-in retry rules decide by it (see Retryable),
// and package telemetry names error.type by it, so the two cannot disagree.
// Classes are told apart by type, never by message, with one exception:
// the few errors by which net/http's own HTTP/2 client reports a lost
// connection, a stream the server did not process, or that a reset came
// from the server have no type to tell them by (see ClassConnectionClosed,
// ClassStreamReset and ClassStreamRefused).
//
// Over HTTP/2, a server that fails one request resets its stream where an
// HTTP/1.1 server closes the connection: ClassStreamReset is retried as
// ClassConnectionClosed is, when the request may be repeated (see
// WithNonIdempotentRetries). ClassStreamRefused is the one class retried
// for any request, POST included, when its body can be replayed (it has
// none, or a GetBody): RFC 9113 §8.7 guarantees the server did not process
// it. net/http's Transport retries such a request itself first (at once,
// then after 1s, 2s, 4s ... up to 7 tries, when it can replay the body):
// gotry sees the refusal when that ran out, or when its base does not
// retry (an http.ClientConn, another HTTP/2 client).
type ErrorClass int

// Error classes, in the order ClassifyError tests for them.
const (
	ClassNone              ErrorClass = iota // no error
	ClassCircuitOpen                         // a breaker rejected the request: not retried (the engine decides)
	ClassAttemptTimeout                      // the per-attempt timeout cut an attempt off: retried
	ClassCanceled                            // the caller's context was cancelled: not retried
	ClassDeadline                            // the caller's deadline passed: not retried
	ClassDNSNotFound                         // the host does not exist: not retried
	ClassDNS                                 // another DNS failure (SERVFAIL, ...): retried
	ClassTLS                                 // a certificate or TLS protocol failure: not retried
	ClassConnectionRefused                   // nothing listened at the address: retried
	ClassConnectionReset                     // reset, aborted, or a write hit a broken pipe: retried
	ClassConnectionClosed                    // closed before a full response (EOF, or net/http's HTTP/2 client lost the connection): retried
	ClassStreamReset                         // the HTTP/2 server reset the request's stream (RST_STREAM): retried when idempotent
	ClassStreamRefused                       // the HTTP/2 server refused the stream unprocessed (REFUSED_STREAM, or above a GOAWAY's last stream id): retried whatever the method
	ClassTimeout                             // a network timeout (dial, TLS handshake, headers, DNS): retried
	ClassDial                                // any other failure to dial, so never reached the server: retried
	ClassOther                               // anything else: not retried
)

// String returns the class's name in snake case (e.g. "connection_reset"),
// or "ErrorClass(n)" for a value outside the classes.
func (c ErrorClass) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassCircuitOpen:
		return "circuit_open"
	case ClassAttemptTimeout:
		return "attempt_timeout"
	case ClassCanceled:
		return "canceled"
	case ClassDeadline:
		return "deadline"
	case ClassDNSNotFound:
		return "dns_not_found"
	case ClassDNS:
		return "dns"
	case ClassTLS:
		return "tls"
	case ClassConnectionRefused:
		return "connection_refused"
	case ClassConnectionReset:
		return "connection_reset"
	case ClassConnectionClosed:
		return "connection_closed"
	case ClassStreamReset:
		return "stream_reset"
	case ClassStreamRefused:
		return "stream_refused"
	case ClassTimeout:
		return "timeout"
	case ClassDial:
		return "dial"
	case ClassOther:
		return "other"
	}
	return "ErrorClass(" + strconv.Itoa(int(c)) + ")"
}

// Retryable reports whether the built-in rules retry an attempt that failed
// with an error of class c: a failure of the network that may pass, never
// a decision of the caller, the breaker or the server's identity.
func (c ErrorClass) Retryable() bool {
	switch c {
	case ClassAttemptTimeout, ClassDNS, ClassConnectionRefused, ClassConnectionReset,
		ClassConnectionClosed, ClassStreamReset, ClassStreamRefused, ClassTimeout, ClassDial:
		return true
	}
	return false
}

// ClassifyError returns the class of an attempt's error (ClassNone for
// nil). It walks err's chain with errors.Is and errors.As, one branch per
// class, and ends in ClassOther.
func ClassifyError(err error) ErrorClass {
	if err == nil {
		return ClassNone
	}
	// In order: gotry's own errors and the caller's context, DNS, TLS, a
	// broken connection, HTTP/2 failures of one stream and a connection
	// closed after a GOAWAY (see h2reset.go). Each step returns ClassNone
	// for an error that is none of its.
	if c := classifyEnd(err); c != ClassNone {
		return c
	}
	if c := classifyLookup(err); c != ClassNone {
		return c
	}
	if c := classifyTLS(err); c != ClassNone {
		return c
	}
	if c := classifyConn(err); c != ClassNone {
		return c
	}
	if c := classifyH2(err); c != ClassNone {
		return c
	}
	// Network timeouts (dial, TLS handshake, response headers).
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return ClassTimeout
	}
	// Any other failure to dial never reached the server.
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return ClassDial
	}
	// Anything else is unknown: do not repeat it.
	return ClassOther
}

// classifyEnd is ClassifyError's first step: gotry's own errors (a breaker
// rejection, a per-attempt timeout) and the caller's context ending;
// ClassNone for any other error. The timeout is checked before the context
// errors because it also matches context.DeadlineExceeded.
func classifyEnd(err error) ErrorClass {
	switch {
	case errors.Is(err, resilience.ErrCircuitOpen):
		return ClassCircuitOpen
	case errors.Is(err, resilience.ErrAttemptTimeout):
		return ClassAttemptTimeout
	// The caller's context ended (however wrapped): the caller no longer
	// wants an answer.
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ClassDeadline
	}
	return ClassNone
}

// classifyLookup classes a DNS failure: "no such host" will not fix
// itself; other lookup failures (timeouts, SERVFAIL) may. ClassNone for an
// error that is no lookup's.
func classifyLookup(err error) ErrorClass {
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		return ClassNone
	}
	switch {
	case dnsErr.IsNotFound:
		return ClassDNSNotFound
	case dnsErr.IsTimeout:
		return ClassTimeout
	}
	return ClassDNS
}

// classifyTLS returns ClassTLS for the configuration errors of TLS: a
// certificate problem, a TLS alert, a server that does not speak TLS; and
// ClassNone otherwise.
func classifyTLS(err error) ErrorClass {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalidCert      x509.CertificateInvalidError
		hostnameErr      x509.HostnameError
		verifyErr        *tls.CertificateVerificationError
		recordErr        tls.RecordHeaderError
		alert            tls.AlertError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &invalidCert) || errors.As(err, &hostnameErr) ||
		errors.As(err, &verifyErr) || errors.As(err, &recordErr) || errors.As(err, &alert) {
		return ClassTLS
	}
	return ClassNone
}

// classifyConn classes a broken connection: refused, reset, aborted,
// closed under us; ClassNone for any other error.
func classifyConn(err error) ErrorClass {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return ClassConnectionReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ClassConnectionClosed
	case isStdlibConnLoss(err):
		return ClassConnectionClosed
	}
	return ClassNone
}
