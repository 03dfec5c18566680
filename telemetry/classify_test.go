package telemetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

type quotaErr struct{}

func (quotaErr) Error() string     { return "quota" }
func (quotaErr) ErrorType() string { return "quota_exceeded" }

func TestErrorType(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"breaker rejection", &resilience.CircuitOpenError{Key: "h", State: resilience.BreakerOpen}, ErrorTypeCircuitOpen},
		{"shed by the concurrency limit", &resilience.OverloadError{Key: "h", Limit: 4, InFlight: 4}, ErrorTypeOverloaded},
		{"give-up whose last attempt was shed", &resilience.Error{Err: &resilience.OverloadError{Key: "h"}}, ErrorTypeOverloaded},
		{"per-attempt timeout (also a deadline)", errors.Join(resilience.ErrAttemptTimeout, context.DeadlineExceeded), ErrorTypeAttemptTimeout},
		{"caller cancelled", fmt.Errorf("x: %w", context.Canceled), ErrorTypeCanceled},
		{"caller deadline", context.DeadlineExceeded, ErrorTypeTimeout},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, ErrorTypeDNSNotFound},
		{"dns timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, ErrorTypeTimeout},
		{"dns other", &net.DNSError{Err: "server misbehaving", Name: "x"}, ErrorTypeDNS},
		{"unknown authority", x509.UnknownAuthorityError{}, ErrorTypeTLS},
		{"not tls", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, ErrorTypeTLS},
		{"tls alert", tls.AlertError(40), ErrorTypeTLS},
		{"refused", refused, ErrorTypeConnectionRefused},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ErrorTypeConnectionReset},
		{"broken pipe", syscall.EPIPE, ErrorTypeConnectionReset},
		{"eof", io.EOF, ErrorTypeConnectionClosed},
		{"unexpected eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), ErrorTypeConnectionClosed},
		{"network timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, ErrorTypeTimeout},
		{"url.Error", &url.Error{Op: "Get", URL: "http://h/?token=s", Err: refused}, ErrorTypeConnectionRefused},
		{"give-up: the last error counts", &resilience.Error{Attempts: 2, Err: io.EOF,
			Errs: []error{errors.Join(resilience.ErrAttemptTimeout, context.DeadlineExceeded), io.EOF}}, ErrorTypeConnectionClosed},
		{"ErrorType method", fmt.Errorf("call: %w", quotaErr{}), "quota_exceeded"},
		{"unknown", errors.New("boom"), ErrorTypeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ErrorType(tc.err); got != tc.want {
				t.Errorf("ErrorType(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorMessageDropsURL(t *testing.T) {
	err := &url.Error{Op: "Get", URL: "http://h/p?token=secret", Err: syscall.ECONNREFUSED}
	got := errorMessage(fmt.Errorf("wrapped: %w", err))
	if strings.Contains(got, "secret") || strings.Contains(got, "http://") || !strings.Contains(got, "refused") {
		t.Errorf("errorMessage = %q", got)
	}
}

func TestRetryTrigger(t *testing.T) {
	for _, tc := range []struct {
		code int
		err  error
		want string
	}{
		{429, nil, "429"},
		{503, nil, "5xx"},
		{408, nil, "4xx"},
		{0, syscall.ECONNRESET, ErrorTypeConnectionReset},
		{0, nil, ErrorTypeOther},
	} {
		if got := retryTrigger(tc.code, tc.err); got != tc.want {
			t.Errorf("retryTrigger(%d, %v) = %q, want %q", tc.code, tc.err, got, tc.want)
		}
	}
}

func TestFullURL(t *testing.T) {
	for _, tc := range []struct {
		in, want, noQuery string
	}{
		{"https://user:pw@api.example:8443/a%2Fb/c?token=s#frag", "https://REDACTED:REDACTED@api.example:8443/a%2Fb/c?token=s", "https://REDACTED:REDACTED@api.example:8443/a%2Fb/c"},
		{"https://user@h/", "https://REDACTED:REDACTED@h/", "https://REDACTED:REDACTED@h/"},
		{"http://h/", "http://h/", "http://h/"},
		{"http://[::1]:80", "http://[::1]:80", "http://[::1]:80"},
		{"http://h/p?color=blue&sig=abc", "http://h/p?color=blue&sig=REDACTED", "http://h/p"},
		{"http://h/p?X-Amz-Signature=1&a=2&X-Amz-Credential=k%2Fd&X-Amz-Security-Token=t", "http://h/p?X-Amz-Signature=REDACTED&a=2&X-Amz-Credential=REDACTED&X-Amz-Security-Token=REDACTED", "http://h/p"},
		{"http://h/p?AWSAccessKeyId=k&Signature=s&X-Goog-Signature=g&q=1", "http://h/p?AWSAccessKeyId=REDACTED&Signature=REDACTED&X-Goog-Signature=REDACTED&q=1", "http://h/p"},
		{"http://h/p?SIG=x&signature=y&sig", "http://h/p?SIG=x&signature=y&sig=REDACTED", "http://h/p"},
		{"http://h/p?%73ig=x&a=b%26c", "http://h/p?%73ig=REDACTED&a=b%26c", "http://h/p"},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := fullURL(u, false); got != tc.want {
			t.Errorf("fullURL(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if got := fullURL(u, true); got != tc.noQuery {
			t.Errorf("fullURL(%s) without query = %s, want %s", tc.in, got, tc.noQuery)
		}
	}
}

// A query without sensitive parameters is kept as it is, at no cost.
func TestRedactQueryAllocatesOnlyToRedact(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = redactQuery("a=1&b=2&c") }); n != 0 {
		t.Errorf("%v allocations for a query with nothing to redact, want 0", n)
	}
}

func TestMethodAndHostPort(t *testing.T) {
	for _, tc := range []struct{ in, name, span, attempt string }{
		{"", "GET", "gotry GET", "GET"},
		{"POST", "POST", "gotry POST", "POST"},
		{"PURGE", "_OTHER", "gotry HTTP", "HTTP"},
	} {
		n, s, a := method(tc.in)
		if n != tc.name || s != tc.span || a != tc.attempt {
			t.Errorf("method(%q) = %q %q %q", tc.in, n, s, a)
		}
	}
	for in, want := range map[string]string{
		"https://h/": "h 443", "http://h/": "h 80", "http://h:8080/": "h 8080", "http://[::1]:9/": "::1 9",
	} {
		u, _ := url.Parse(in)
		h, p := hostPort(u)
		if got := fmt.Sprint(h, " ", p); got != want {
			t.Errorf("hostPort(%s) = %s, want %s", in, got, want)
		}
	}
}

// Every error class of the transport, the one its retry rules decide by,
// has an error.type: a class added there cannot go unnamed here.
func TestErrorTypeNamesEveryClass(t *testing.T) {
	if len(errorTypes) != int(transport.ClassOther)+1 {
		t.Fatalf("errorTypes names %d classes, transport has %d", len(errorTypes), int(transport.ClassOther)+1)
	}
	for c := transport.ClassCircuitOpen; c <= transport.ClassOther; c++ {
		if errorTypes[c] == "" {
			t.Errorf("class %v has no error.type", c)
		}
	}
}
