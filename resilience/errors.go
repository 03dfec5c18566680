package resilience

import (
	"errors"
	"fmt"
	"strings"

	"github.com/MrVSiK/gotry/internal/timeouterr"
)

// The sentinel errors, matched with errors.Is.
var (
	// ErrCircuitOpen is returned (wrapped in a *CircuitOpenError) when a
	// request is rejected at admission because its key's breaker is open,
	// or half-open with every probe slot taken.
	ErrCircuitOpen = errors.New("resilience: circuit breaker is open")

	// ErrAttemptTimeout marks an attempt that ran past its per-attempt
	// timeout. Unlike an expired caller deadline, it is retryable. The error
	// an attempt returns in that case matches both ErrAttemptTimeout and
	// context.DeadlineExceeded.
	ErrAttemptTimeout = timeouterr.ErrAttemptTimeout

	// ErrAttemptLost is the cancellation cause (context.Cause) of an attempt
	// that was cancelled on purpose because another attempt won, or because
	// the call ended without it. Code running inside an attempt can tell it
	// from the caller's cancellation and from a per-attempt timeout, whose
	// cause is ErrAttemptTimeout. Its ErrorType method returns
	// "attempt_lost", which OpenTelemetry instrumentation (otelhttp) records
	// as error.type instead of the error's Go type.
	ErrAttemptLost error = attemptLostError{}

	// ErrPermanent marks an error that must not be retried; see Permanent.
	ErrPermanent = errors.New("resilience: permanent error")
)

// attemptLostError is the type of ErrAttemptLost.
type attemptLostError struct{}

func (attemptLostError) Error() string { return "resilience: attempt lost to another attempt" }

// ErrorType names the error for OpenTelemetry's error.type, which
// instrumentations read from an ErrorType method when there is one.
func (attemptLostError) ErrorType() string { return "attempt_lost" }

// CircuitOpenError is the rejection of a request by its breaker.
type CircuitOpenError struct {
	Key   string       // the breaker's key (the host, for the transport)
	State BreakerState // open, or half-open with no probe slot free
}

func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("resilience: %s: circuit breaker is open (%s)", e.Key, e.State)
}

// Is makes errors.Is(err, ErrCircuitOpen) true.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// attemptTimeoutError is the error of an attempt cut off by its per-attempt
// timeout (the transport's header timeout returns it too). It wraps the
// error the attempt returned.
type attemptTimeoutError = timeouterr.Error

// timedOut reports whether an attempt's error is a timeout: its per-attempt
// timeout's, or an error of the operation's own that says it is one (as
// net.Error and net/http's timeouts do). It looks at err itself, unwrapping
// nothing: cheap, and what a transport returns unwrapped.
func timedOut(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// Error is returned when the engine gives up after more than one attempt with
// no result to return but an error. Err is the last attempt's error; Errs
// holds the errors of the first and the most recent attempts, in the order
// they ended, so errors.Is and errors.As find the error that started the
// trouble and the ones that ended it. Its size is bounded whatever
// MaxAttempts is: at most 8 errors are kept, and Omitted counts
// the ones dropped from the middle.
type Error struct {
	// Attempts is the number of attempts launched (retries and hedges
	// included).
	Attempts int
	// Err is the error of the last attempt to end.
	Err error
	// Errs holds the errors of the first 4 attempts to end
	// with one and of the most recent ones, oldest first (Err is the last).
	Errs []error
	// Omitted is how many errors between the first and the most recent
	// ones were not kept.
	Omitted int
	// Reason says why no further attempt was made.
	Reason EndReason
}

// maxKeptErrors bounds Error.Errs: half of it for the first errors of a
// call, half for the most recent.
const maxKeptErrors = 8

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "resilience: gave up after %d attempts (%s): %v", e.Attempts, e.Reason, e.Err)
	if n := len(e.Errs); n > 1 {
		b.WriteString(" (earlier: ")
		for i, err := range e.Errs[:n-1] {
			if i > 0 {
				b.WriteString("; ")
			}
			if e.Omitted > 0 && i == maxKeptErrors/2 {
				fmt.Fprintf(&b, "... %d more ...; ", e.Omitted)
			}
			b.WriteString(err.Error())
		}
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the kept errors, so errors.Is and errors.As look through
// all of them.
func (e *Error) Unwrap() []error {
	if len(e.Errs) == 0 && e.Err != nil {
		return []error{e.Err}
	}
	return e.Errs
}

// errorLog keeps the errors of a call within maxKeptErrors: the first half
// as they come, then a window of the most recent ones.
type errorLog struct {
	errs    []error
	omitted int
}

func (l *errorLog) add(err error) {
	if len(l.errs) < maxKeptErrors {
		l.errs = append(l.errs, err)
		return
	}
	recent := l.errs[maxKeptErrors/2:]
	copy(recent, recent[1:])
	recent[len(recent)-1] = err
	l.omitted++
}

// last returns the most recent error, or nil.
func (l *errorLog) last() error {
	if n := len(l.errs); n > 0 {
		return l.errs[n-1]
	}
	return nil
}

// kept returns the kept errors, oldest first.
func (l *errorLog) kept() []error { return l.errs }
