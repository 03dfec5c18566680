package telemetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"

	"github.com/MrVSiK/gotry/resilience"
)

// Values ErrorType returns. They are error.type values: low cardinality, the
// same on spans, metrics and logs.
const (
	ErrorTypeCircuitOpen       = "circuit_open"       // a breaker rejected the request
	ErrorTypeAttemptTimeout    = "attempt_timeout"    // the per-attempt timeout cut an attempt off
	ErrorTypeCanceled          = "canceled"           // the caller's context was cancelled
	ErrorTypeTimeout           = "timeout"            // a deadline passed: the caller's, or a network timeout
	ErrorTypeConnectionRefused = "connection_refused" // nothing listened at the address
	ErrorTypeConnectionReset   = "connection_reset"   // the peer reset or aborted the connection, or a write hit a broken pipe
	ErrorTypeConnectionClosed  = "connection_closed"  // the connection closed before a full response (EOF)
	ErrorTypeDNSNotFound       = "dns_not_found"      // the host does not exist
	ErrorTypeDNS               = "dns"                // another DNS failure
	ErrorTypeTLS               = "tls"                // a certificate or TLS protocol failure
	ErrorTypeOther             = "_OTHER"             // anything else (the conventions' fallback)
)

// ErrorType classifies err into a low-cardinality error.type: one of the
// Err* constants above, or the value of an ErrorType() string method found
// in err's chain (the same hook the OpenTelemetry conventions honour). For a
// give-up (*resilience.Error) it classifies the last attempt's error. It
// returns "" for nil. Spans, metrics and logs all use it, and it matches by
// type, never by message.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	// A give-up holds every attempt's error; the last one ended the request.
	// gave.Err != err compares identity on purpose: it only stops recursing
	// into the very same value, so errors.Is (which also follows chains and
	// Is methods) would change which errors get classified.
	var gave *resilience.Error
	if errors.As(err, &gave) && gave.Err != nil && gave.Err != err { //nolint:errorlint // identity check, see above
		return ErrorType(gave.Err)
	}
	// A breaker rejection and a per-attempt timeout are gotry's own; checked
	// first, the timeout because it also matches context.DeadlineExceeded.
	if errors.Is(err, resilience.ErrCircuitOpen) {
		return ErrorTypeCircuitOpen
	}
	if errors.Is(err, resilience.ErrAttemptTimeout) {
		return ErrorTypeAttemptTimeout
	}
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		if s := typed.ErrorType(); s != "" {
			return s
		}
	}
	if errors.Is(err, context.Canceled) {
		return ErrorTypeCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrorTypeTimeout
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		switch {
		case dnsErr.IsNotFound:
			return ErrorTypeDNSNotFound
		case dnsErr.IsTimeout:
			return ErrorTypeTimeout
		}
		return ErrorTypeDNS
	}
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
		return ErrorTypeTLS
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrorTypeConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return ErrorTypeConnectionReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ErrorTypeConnectionClosed
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return ErrorTypeTimeout
	}
	return ErrorTypeOther
}

// errorMessage is err's text for logs and span status, without the request
// URL that a *url.Error prints (its query may hold credentials).
func errorMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
