package transporttest

import (
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Step is what the RoundTripper does with one request: it waits Latency,
// then fails with Err when Err is set, and otherwise answers with a
// response of Status, Header and Body. The zero Step answers 200 OK with
// an empty body at once. A Step is a value: its With methods return a
// changed copy and leave the receiver alone.
type Step struct {
	// Status is the response's status code, 100..599; 0 means 200. A
	// Step with another value fails its request with an error.
	Status int
	// Header holds the response's headers; nil means none. Each response
	// gets its own copy.
	Header http.Header
	// Body is the response body.
	Body string
	// Err, when set, is returned instead of a response (Status, Header and
	// Body are then ignored). ConnectionReset makes the error of a
	// connection the server reset.
	Err error
	// Latency is how long the RoundTripper waits before answering, on its
	// clock. When the request's context ends first, RoundTrip returns the
	// context's error at once.
	Latency time.Duration
	// Hang makes the RoundTripper wait until the request's context ends
	// and return its error, as a server that never answers (Latency is
	// then ignored). Give such a request a deadline, or gotry a
	// per-attempt timeout or hedging, or it waits for ever.
	Hang bool
}

// Status returns a step that answers with status code code.
func Status(code int) Step { return Step{Status: code} }

// Fail returns a step that fails with err.
func Fail(err error) Step { return Step{Err: err} }

// Hang returns a step that never answers: RoundTrip returns when the
// request's context ends, with its error.
func Hang() Step { return Step{Hang: true} }

// ConnectionReset returns a step that fails as a request does when the
// server resets its connection: with the error http.Transport returns then,
// a *net.OpError around syscall.ECONNRESET ("read: connection reset by
// peer"). gotry classifies it as transport.ClassConnectionReset and
// retries it, when the request may be repeated.
func ConnectionReset() Step { return Fail(ResetError()) }

// ResetError returns a new error of a connection the server reset: a
// *net.OpError whose chain holds syscall.ECONNRESET, as http.Transport's
// is. errors.Is(err, syscall.ECONNRESET) holds for it.
func ResetError() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// WithHeader returns a copy of s whose response also carries the header
// key: value (added to any value key already has).
func (s Step) WithHeader(key, value string) Step {
	h := s.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	s.Header = h
	return s
}

// WithBody returns a copy of s whose response body is body.
func (s Step) WithBody(body string) Step {
	s.Body = body
	return s
}

// After returns a copy of s that waits d before answering (its Latency).
func (s Step) After(d time.Duration) Step {
	s.Latency = d
	return s
}

// status is the response's status code in effect.
func (s *Step) status() int {
	if s.Status == 0 {
		return http.StatusOK
	}
	return s.Status
}
