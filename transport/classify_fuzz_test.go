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

// classLeaf is one error a chain can be built from, with the decision the
// built-in rules give it alone (behind transparent wrappers).
type classLeaf struct {
	name  string
	err   func() error
	retry bool
}

// timeoutErr is a net.Error reporting a timeout, like a deadline on a conn.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "fuzz: i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// wrapErr is a transparent wrapper of a kind the classifier cannot know.
type wrapErr struct{ err error }

func (w wrapErr) Error() string { return "fuzz: wrapped" }
func (w wrapErr) Unwrap() error { return w.err }

var classLeaves = []classLeaf{
	{"context.Canceled", func() error { return context.Canceled }, false},
	{"context.DeadlineExceeded", func() error { return context.DeadlineExceeded }, false},
	{"ErrAttemptTimeout", func() error { return transport.ErrAttemptTimeout }, true},
	{"ECONNRESET", func() error { return syscall.ECONNRESET }, true},
	{"ECONNREFUSED", func() error { return syscall.ECONNREFUSED }, true},
	{"ECONNABORTED", func() error { return syscall.ECONNABORTED }, true},
	{"EPIPE", func() error { return syscall.EPIPE }, true},
	{"ETIMEDOUT", func() error { return syscall.ETIMEDOUT }, true},
	{"io.EOF", func() error { return io.EOF }, true},
	{"io.ErrUnexpectedEOF", func() error { return io.ErrUnexpectedEOF }, true},
	{"net.ErrClosed", func() error { return net.ErrClosed }, true},
	{"os.ErrDeadlineExceeded", func() error { return os.ErrDeadlineExceeded }, true},
	{"dns not found", func() error { return &net.DNSError{Err: "no such host", Name: "x.test", IsNotFound: true} }, false},
	{"dns not found+timeout", func() error { return &net.DNSError{Err: "x", Name: "x.test", IsNotFound: true, IsTimeout: true} }, false},
	{"dns timeout", func() error { return &net.DNSError{Err: "timeout", Name: "x.test", IsTimeout: true} }, true},
	{"dns servfail", func() error { return &net.DNSError{Err: "server misbehaving", Name: "x.test"} }, true},
	{"x509 unknown authority", func() error { return x509.UnknownAuthorityError{} }, false},
	{"x509 invalid", func() error { return x509.CertificateInvalidError{Reason: x509.Expired} }, false},
	{"x509 hostname", func() error { return x509.HostnameError{Host: "x.test"} }, false},
	{"tls verification", func() error { return &tls.CertificateVerificationError{Err: errors.New("bad")} }, false},
	{"tls record header", func() error { return tls.RecordHeaderError{Msg: "not tls"} }, false},
	{"dial error", func() error { return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("fuzz: no route")} }, true},
	{"timeout", func() error { return timeoutErr{} }, true},
	{"message only: reset", func() error { return errors.New("read: connection reset by peer") }, false},
	{"message only: timeout", func() error { return errors.New("i/o timeout") }, false},
	{"message only: EOF", func() error { return errors.New("EOF") }, false},
}

// classNode is an error under construction with what the oracle knows of it.
type classNode struct {
	err         error
	leaves      []int // indexes into classLeaves
	transparent bool  // only fmt.Errorf %w and wrapErr wrap the leaves
}

// buildErrorChain turns fuzz bytes into an error tree: each byte pushes a
// leaf or wraps (one or two) errors from the stack; what is left is joined.
func buildErrorChain(program []byte) classNode {
	var stack []classNode
	pop := func() classNode {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return n
	}
	const wrappers = 7
	for _, b := range program {
		op := int(b) % (len(classLeaves) + wrappers)
		if op < len(classLeaves) {
			stack = append(stack, classNode{err: classLeaves[op].err(), leaves: []int{op}, transparent: true})
			continue
		}
		op -= len(classLeaves)
		if len(stack) == 0 {
			continue
		}
		switch op {
		case 0:
			n := pop()
			stack = append(stack, classNode{fmt.Errorf("fuzz: %w", n.err), n.leaves, n.transparent})
		case 1:
			n := pop()
			stack = append(stack, classNode{wrapErr{n.err}, n.leaves, n.transparent})
		case 2:
			n := pop()
			stack = append(stack, classNode{&url.Error{Op: "Get", URL: "http://x.test", Err: n.err}, n.leaves, false})
		case 3:
			n := pop()
			stack = append(stack, classNode{&net.OpError{Op: "read", Net: "tcp", Err: n.err}, n.leaves, false})
		case 4:
			n := pop()
			stack = append(stack, classNode{&os.SyscallError{Syscall: "read", Err: n.err}, n.leaves, false})
		case 5, 6:
			if len(stack) < 2 {
				continue
			}
			b, a := pop(), pop()
			var err error
			if op == 5 {
				err = errors.Join(a.err, b.err)
			} else {
				err = fmt.Errorf("fuzz: %w, then %w", a.err, b.err)
			}
			stack = append(stack, classNode{err, append(append([]int(nil), a.leaves...), b.leaves...), false})
		}
	}
	switch len(stack) {
	case 0:
		return classNode{transparent: true}
	case 1:
		return stack[0]
	}
	all := classNode{}
	errs := make([]error, len(stack))
	for i, n := range stack {
		errs[i] = n.err
		all.leaves = append(all.leaves, n.leaves...)
	}
	all.err = errors.Join(errs...)
	return all
}

func leafNames(idx []int) []string {
	names := make([]string, len(idx))
	for i, j := range idx {
		names[i] = classLeaves[j].name
	}
	return names
}

// FuzzDefaultClassifier runs DefaultClassifier over arbitrary status codes
// and error trees. It never panics and always decides; the caller's context
// errors are never retried (a per-attempt timeout always is); 429, 502, 503
// and 504 are always retried (429 as Throttled) and every other status
// never; an error is
// retried only if a leaf of a retryable kind is in it (never for its
// message); and a single leaf behind transparent wrappers gets its own
// decision.
func FuzzDefaultClassifier(f *testing.F) {
	for _, s := range []struct {
		code    int
		program []byte
	}{
		{200, nil}, {429, nil}, {502, nil}, {503, nil}, {504, nil}, {500, nil}, {404, nil}, {-1, nil}, {1 << 20, nil},
		{0, []byte{0}}, {0, []byte{2, 1, 31}}, {0, []byte{3, 26}}, {0, []byte{0, 3, 31}},
		{0, []byte{23, 28}}, {0, []byte{12, 29}}, {0, []byte{22, 28}},
	} {
		f.Add(s.code, s.program)
	}
	f.Fuzz(func(t *testing.T, code int, program []byte) {
		n := buildErrorChain(program)
		a := transport.Attempt{Request: &http.Request{Method: http.MethodGet}, Number: 1, Err: n.err}
		if n.err == nil {
			a.Response = &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}
		}
		d := transport.DefaultClassifier(a)
		if d != transport.Retry && d != transport.DontRetry && (d != transport.Throttled || code != 429) {
			t.Fatalf("decision %v, want Retry or DontRetry (Throttled for a 429)", d)
		}
		if again := transport.DefaultClassifier(a); again != d {
			t.Fatalf("decided %v then %v for the same attempt", d, again)
		}
		if n.err == nil {
			want := transport.DontRetry
			switch code {
			case 429:
				want = transport.Throttled // no Retry-After here: only 429 is a throttle
			case 502, 503, 504:
				want = transport.Retry
			}
			if d != want {
				t.Fatalf("status %d: %v, want %v", code, d, want)
			}
			return
		}
		names := leafNames(n.leaves)
		attemptTimeout := errors.Is(n.err, transport.ErrAttemptTimeout)
		callerCtx := errors.Is(n.err, context.Canceled) || errors.Is(n.err, context.DeadlineExceeded)
		switch {
		case attemptTimeout && d != transport.Retry:
			t.Fatalf("per-attempt timeout in %v not retried", names)
		case !attemptTimeout && callerCtx && d == transport.Retry:
			t.Fatalf("caller's context error in %v retried", names)
		}
		if d == transport.Retry {
			ok := false
			for _, i := range n.leaves {
				ok = ok || classLeaves[i].retry
			}
			if !ok {
				t.Fatalf("retried %v, none of which is a retryable kind", names)
			}
		}
		if n.transparent && len(n.leaves) == 1 {
			l := classLeaves[n.leaves[0]]
			if want := l.retry; (d == transport.Retry) != want {
				t.Fatalf("%s behind transparent wrappers: %v, want retry=%v", l.name, d, want)
			}
		}
	})
}
