package telemetry

import (
	"errors"
	"net/url"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
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
	ErrorTypeStreamReset       = "stream_reset"       // the HTTP/2 server reset the request's stream
	ErrorTypeStreamRefused     = "stream_refused"     // the HTTP/2 server refused the stream unprocessed (REFUSED_STREAM, GOAWAY)
	ErrorTypeDNSNotFound       = "dns_not_found"      // the host does not exist
	ErrorTypeDNS               = "dns"                // another DNS failure
	ErrorTypeTLS               = "tls"                // a certificate or TLS protocol failure
	ErrorTypeOverloaded        = "overloaded"         // the concurrency limit shed the request: nothing was sent
	ErrorTypeOther             = "_OTHER"             // anything else (the conventions' fallback)
	// ErrorTypeAttemptLost is what resilience.ErrAttemptLost's ErrorType
	// method returns: an attempt cancelled because another won. gotry's
	// own spans give a cancelled attempt no error.type; an otelhttp span
	// of such an attempt (gotry → otelhttp) carries this one.
	ErrorTypeAttemptLost = "attempt_lost"
)

// ErrorType names err as a low-cardinality error.type by its class, the
// transport.ClassifyError class its retry rules decide by: one of the
// ErrorType* constants above, or the value of an ErrorType() string method found
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
	// The class is the transport's, the one its retry rules decide by. A
	// breaker rejection and a per-attempt timeout are gotry's own and win
	// over an ErrorType method; every other class yields to one.
	class := transport.ClassifyError(err)
	switch class {
	case transport.ClassCircuitOpen:
		return ErrorTypeCircuitOpen
	case transport.ClassAttemptTimeout:
		return ErrorTypeAttemptTimeout
	}
	if errors.Is(err, resilience.ErrOverloaded) {
		return ErrorTypeOverloaded
	}
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		if s := typed.ErrorType(); s != "" {
			return s
		}
	}
	return errorTypes[class]
}

// errorTypes names each error class as error.type. The caller's deadline
// and a network timeout are both "timeout"; a failure to dial that is no
// other class is "_OTHER", as before the classes were shared.
var errorTypes = [...]string{
	transport.ClassNone:              "",
	transport.ClassCircuitOpen:       ErrorTypeCircuitOpen,
	transport.ClassAttemptTimeout:    ErrorTypeAttemptTimeout,
	transport.ClassCanceled:          ErrorTypeCanceled,
	transport.ClassDeadline:          ErrorTypeTimeout,
	transport.ClassDNSNotFound:       ErrorTypeDNSNotFound,
	transport.ClassDNS:               ErrorTypeDNS,
	transport.ClassTLS:               ErrorTypeTLS,
	transport.ClassConnectionRefused: ErrorTypeConnectionRefused,
	transport.ClassConnectionReset:   ErrorTypeConnectionReset,
	transport.ClassConnectionClosed:  ErrorTypeConnectionClosed,
	transport.ClassStreamReset:       ErrorTypeStreamReset,
	transport.ClassStreamRefused:     ErrorTypeStreamRefused,
	transport.ClassTimeout:           ErrorTypeTimeout,
	transport.ClassDial:              ErrorTypeOther,
	transport.ClassOther:             ErrorTypeOther,
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
