package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

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
)

// String returns "default", "retry" or "dont-retry".
func (d Decision) String() string {
	switch d {
	case Retry:
		return "retry"
	case DontRetry:
		return "dont-retry"
	}
	return "default"
}

// Classifier decides whether an attempt is retryable. It may be called
// concurrently (hedged attempts finish on their own goroutines) and must not
// read the response body.
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
// statuses (502, 503, 504 and 429). It returns Retry or DontRetry, never
// Default. See decide for the rules.
func DefaultClassifier(a Attempt) Decision {
	s := defaultStatuses
	return decide(a, &s)
}

// decide applies the built-in rules with the given retryable statuses.
func decide(a Attempt, statuses *statusSet) Decision {
	if a.Err != nil {
		if retryableError(a.Err) {
			return Retry
		}
		return DontRetry
	}
	if a.Response == nil {
		return DontRetry
	}
	if c := a.Response.StatusCode; c == http.StatusTooManyRequests || statuses.has(c) {
		return Retry
	}
	return DontRetry
}

// retryableError reports whether an attempt's error is worth another try.
// Errors are told apart by type, never by message.
func retryableError(err error) bool {
	// A per-attempt timeout is ours, not the caller's: retry. Checked
	// first because it also matches context.DeadlineExceeded.
	if errors.Is(err, resilience.ErrAttemptTimeout) {
		return true
	}
	// The caller's context ended (however wrapped): the caller no longer
	// wants an answer.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// DNS: "no such host" will not fix itself; other lookup failures
	// (timeouts, SERVFAIL) may.
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return !dnsErr.IsNotFound
	}
	// Certificate problems and a server that does not speak TLS are
	// configuration errors.
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalidCert      x509.CertificateInvalidError
		hostnameErr      x509.HostnameError
		verifyErr        *tls.CertificateVerificationError
		recordErr        tls.RecordHeaderError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &invalidCert) || errors.As(err, &hostnameErr) ||
		errors.As(err, &verifyErr) || errors.As(err, &recordErr) {
		return false
	}
	// The connection broke: reset, refused, aborted, closed under us.
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	// Network timeouts (dial, TLS handshake, response headers).
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	// Any failure to dial never reached the server.
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	// Anything else is unknown: do not repeat it.
	return false
}
