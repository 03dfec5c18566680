package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/MrVSiK/gotry/transport"
)

// timeoutError is a network timeout as net.Error reports it.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestDefaultClassifier(t *testing.T) {
	resp := func(code int, kv ...string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		return r
	}
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want transport.Decision
	}{
		{"502", resp(502), nil, transport.Retry},
		{"503", resp(503), nil, transport.Retry},
		{"504", resp(504), nil, transport.Retry},
		{"429", resp(429), nil, transport.Throttled},
		{"503 with Retry-After", resp(503, "Retry-After", "1"), nil, transport.Throttled},
		{"503 with Retry-After as a date", resp(503, "Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"), nil, transport.Throttled},
		{"503 with a Retry-After that does not parse", resp(503, "Retry-After", "soon"), nil, transport.Retry},
		{"503 with Retry-After: 0", resp(503, "Retry-After", "0"), nil, transport.Retry},
		{"502 with Retry-After", resp(502, "Retry-After", "1"), nil, transport.Retry},
		{"500", resp(500), nil, transport.DontRetry},
		{"501", resp(501), nil, transport.DontRetry},
		{"505", resp(505), nil, transport.DontRetry},
		{"409", resp(409), nil, transport.DontRetry},
		{"404", resp(404), nil, transport.DontRetry},
		{"301", resp(301), nil, transport.DontRetry},
		{"200", resp(200), nil, transport.DontRetry},
		{"101", resp(101), nil, transport.DontRetry},
		{"connection reset", nil, errReset, transport.Retry},
		{"connection refused", nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, transport.Retry},
		{"broken pipe", nil, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, transport.Retry},
		{"EOF", nil, io.EOF, transport.Retry},
		{"unexpected EOF", nil, io.ErrUnexpectedEOF, transport.Retry},
		{"wrapped EOF", nil, fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.EOF), transport.Retry},
		{"network timeout", nil, &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}, transport.Retry},
		{"i/o deadline", nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, transport.Retry},
		{"per-attempt timeout", nil, fmt.Errorf("attempt: %w", transport.ErrAttemptTimeout), transport.Retry},
		{"per-attempt timeout that is also a deadline", nil, errors.Join(transport.ErrAttemptTimeout, context.DeadlineExceeded), transport.Retry},
		{"DNS timeout", nil, &net.DNSError{Err: "timeout", Name: "a.test", IsTimeout: true}, transport.Retry},
		{"DNS server failure", nil, &net.DNSError{Err: "server misbehaving", Name: "a.test", IsTemporary: true}, transport.Retry},
		{"DNS not found", nil, &net.DNSError{Err: "no such host", Name: "a.test", IsNotFound: true}, transport.DontRetry},
		{"wrapped DNS not found", nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}, transport.DontRetry},
		{"context canceled", nil, context.Canceled, transport.DontRetry},
		{"context deadline", nil, context.DeadlineExceeded, transport.DontRetry},
		{"canceled in url.Error", nil, &url.Error{Op: "Get", URL: "http://a.test", Err: context.Canceled}, transport.DontRetry},
		{"deadline in net.OpError", nil, &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, transport.DontRetry},
		{"unknown authority", nil, x509.UnknownAuthorityError{}, transport.DontRetry},
		{"certificate verification", nil, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, transport.DontRetry},
		{"hostname mismatch", nil, x509.HostnameError{Host: "a.test", Certificate: &x509.Certificate{}}, transport.DontRetry},
		{"expired certificate", nil, x509.CertificateInvalidError{Reason: x509.Expired, Cert: &x509.Certificate{}}, transport.DontRetry},
		{"unknown error", nil, errors.New("mystery"), transport.DontRetry},
		{"neither response nor error", nil, nil, transport.DontRetry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := transport.DefaultClassifier(transport.Attempt{Response: tc.resp, Err: tc.err, Number: 1})
			if got != tc.want {
				t.Errorf("DefaultClassifier = %v, want %v", got, tc.want)
			}
		})
	}
}

// readmeClassifier is the spec's custom classifier (a 409 marked
// retryable, a permanent-failure header), once shown in the README.
func readmeClassifier(a transport.Attempt) transport.Decision {
	if a.Response == nil {
		return transport.Default
	}
	switch {
	case a.Response.StatusCode == 409 && a.Response.Header.Get("X-Retryable") == "true":
		return transport.Retry
	case a.Response.Header.Get("X-Permanent-Failure") != "":
		return transport.DontRetry
	}
	return transport.Default
}

func TestCustomClassifier(t *testing.T) {
	tests := []struct {
		name       string
		first      http.HandlerFunc
		wantHits   int
		wantStatus int
	}{
		{"409 marked retryable is retried", reply(409, "X-Retryable", "true"), 2, 200},
		{"409 without the marker is final", reply(409), 1, 409},
		{"503 flagged permanent is final", reply(503, "X-Permanent-Failure", "1"), 1, 503},
		{"500 flagged permanent is final", reply(500, "X-Permanent-Failure", "1"), 1, 500},
		{"plain 503 falls back to the default", reply(503), 2, 200},
		{"plain 500 falls back to the default", reply(500), 1, 500},
		{"connection error falls back to the default", hijackClose, 2, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, tc.first, reply(200))
			tr := transport.New(newBase(t), noDelay, transport.WithClassifier(readmeClassifier))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
		})
	}
}

func TestClassifierSeesEveryAttempt(t *testing.T) {
	var seen events[transport.Attempt]
	var n int
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if n == 2 {
			return nil, errReset
		}
		return fakeResponse(r, 503, "x"), nil
	})
	tr := transport.New(base, noDelay, transport.WithClassifier(func(a transport.Attempt) transport.Decision {
		seen.add(a)
		return transport.Default
	}))
	req := newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	got := seen.get()
	if len(got) != 3 {
		t.Fatalf("classifier called %d times, want 3", len(got))
	}
	for i, a := range got {
		if a.Request != req || a.Number != i+1 || (a.Response == nil) == (a.Err == nil) {
			t.Errorf("attempt %d: %+v, want the caller's request, Number %d, exactly one of Response and Err", i+1, a, i+1)
		}
	}
	if got[1].Err != error(errReset) || got[0].Response.StatusCode != 503 {
		t.Errorf("classifier saw %v and %v", got[0].Response, got[1].Err)
	}
}

func TestDecisionString(t *testing.T) {
	tests := []struct {
		d    transport.Decision
		want string
	}{
		{transport.Default, "default"},
		{transport.Retry, "retry"},
		{transport.DontRetry, "dont-retry"},
		{transport.Throttled, "throttled"},
		{transport.Decision(7), "Decision(7)"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.d.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// ClassifyError is the one taxonomy: the built-in rules retry exactly the
// classes that say Retryable.
func TestClassifyError(t *testing.T) {
	for _, tc := range []struct {
		err       error
		want      transport.ErrorClass
		retryable bool
	}{
		{nil, transport.ClassNone, false},
		{context.Canceled, transport.ClassCanceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), transport.ClassDeadline, false},
		{errors.Join(transport.ErrAttemptTimeout, context.DeadlineExceeded), transport.ClassAttemptTimeout, true},
		{&net.DNSError{Err: "no such host", IsNotFound: true}, transport.ClassDNSNotFound, false},
		{&net.DNSError{Err: "timeout", IsTimeout: true}, transport.ClassTimeout, true},
		{&net.DNSError{Err: "server misbehaving"}, transport.ClassDNS, true},
		{tls.AlertError(40), transport.ClassTLS, false},
		{x509.UnknownAuthorityError{}, transport.ClassTLS, false},
		{os.NewSyscallError("connect", syscall.ECONNREFUSED), transport.ClassConnectionRefused, true},
		{syscall.EPIPE, transport.ClassConnectionReset, true},
		{io.ErrUnexpectedEOF, transport.ClassConnectionClosed, true},
		{&net.OpError{Op: "read", Err: timeoutError{}}, transport.ClassTimeout, true},
		{&net.OpError{Op: "dial", Err: errors.New("no route to host")}, transport.ClassDial, true},
		{errors.New("boom"), transport.ClassOther, false},
	} {
		t.Run(tc.want.String(), func(t *testing.T) {
			got := transport.ClassifyError(tc.err)
			if got != tc.want || got.Retryable() != tc.retryable {
				t.Errorf("ClassifyError(%v) = %v (retryable %v), want %v (%v)", tc.err, got, got.Retryable(), tc.want, tc.retryable)
			}
			if tc.err == nil {
				return
			}
			d := transport.DefaultClassifier(transport.Attempt{Err: tc.err, Number: 1})
			if (d == transport.Retry) != tc.retryable {
				t.Errorf("DefaultClassifier(%v) = %v, but the class says retryable=%v", tc.err, d, tc.retryable)
			}
		})
	}
	if s := transport.ErrorClass(99).String(); s != "ErrorClass(99)" {
		t.Errorf("unknown class prints %q", s)
	}
}
