// Package timeouterr holds the error of an attempt cut off by a time limit
// of its own, which both the engine (resilience: the per-attempt timeout)
// and the transport (its per-attempt header timeout) return. One type, so
// the two match the same errors and report Timeout alike; resilience and
// transport each give it their own name, and neither imports the other's.
package timeouterr

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrAttemptTimeout is resilience.ErrAttemptTimeout (and
// transport.ErrAttemptTimeout): every Error matches it.
var ErrAttemptTimeout = errors.New("resilience: attempt timed out")

// Error is the error of an attempt cut off by its own time limit. It wraps
// what the attempt returned, and matches ErrAttemptTimeout and
// context.DeadlineExceeded; its Timeout method reports true, like other
// network timeouts, so retry rules, the budget, hooks and telemetry treat
// every such cut-off alike.
type Error struct {
	Limit time.Duration // the time the attempt was allowed
	// Headers: Limit is a wait for the response headers, counted from the
	// request's write (the transport's header timeout) rather than from the
	// attempt's start (the engine's per-attempt timeout).
	Headers bool
	Drain   time.Duration // with Headers: the time allowed the written bytes to reach the server
	Err     error         // what the attempt returned
}

func (e *Error) Error() string {
	switch {
	case !e.Headers:
		return fmt.Sprintf("resilience: attempt timed out after %v: %v", e.Limit, e.Err)
	case e.Drain > 0:
		return fmt.Sprintf("transport: attempt timed out: no response headers %v after the request may have reached the server (its write ended %v before that): %v",
			e.Limit, e.Drain.Round(time.Millisecond), e.Err)
	}
	return fmt.Sprintf("transport: attempt timed out: no response headers %v after the request was written: %v", e.Limit, e.Err)
}

func (e *Error) Unwrap() []error {
	return []error{ErrAttemptTimeout, context.DeadlineExceeded, e.Err}
}

// Timeout reports true, like other network timeouts.
func (e *Error) Timeout() bool { return true }

// errHeaders is what IsHeaders matches: an Error with Headers set.
var errHeaders = errors.New("timeouterr: header timeout")

// Is reports whether e is a header timeout when asked for errHeaders (see
// IsHeaders); it matches nothing else itself (Unwrap does).
func (e *Error) Is(target error) bool { return e.Headers && target == errHeaders }

// IsHeaders reports whether err's tree holds an Error with Headers set,
// wherever it is (an engine's timeout may wrap a header timeout).
func IsHeaders(err error) bool { return errors.Is(err, errHeaders) }
