package timeouterr_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/timeouterr"
)

// TestError: both kinds match ErrAttemptTimeout, context.DeadlineExceeded
// and what the attempt returned, and report Timeout; only a header timeout
// is IsHeaders, wrapped or not.
func TestError(t *testing.T) {
	tests := []struct {
		err     *timeouterr.Error
		msg     string
		headers bool
	}{
		{&timeouterr.Error{Limit: time.Second, Err: io.EOF},
			"resilience: attempt timed out after 1s: EOF", false},
		{&timeouterr.Error{Limit: time.Second, Headers: true, Err: io.EOF},
			"transport: attempt timed out: no response headers 1s after the request was written: EOF", true},
		{&timeouterr.Error{Limit: time.Second, Headers: true, Drain: 2500 * time.Microsecond, Err: io.EOF},
			"transport: attempt timed out: no response headers 1s after the request may have reached the server (its write ended 3ms before that): EOF", true},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.msg {
			t.Errorf("Error() = %q, want %q", got, tc.msg)
		}
		for _, target := range []error{timeouterr.ErrAttemptTimeout, context.DeadlineExceeded, io.EOF} {
			if !errors.Is(tc.err, target) {
				t.Errorf("%q does not match %v", tc.msg, target)
			}
		}
		if errors.Is(tc.err, context.Canceled) {
			t.Errorf("%q matches context.Canceled", tc.msg)
		}
		if !tc.err.Timeout() {
			t.Errorf("%q: Timeout() = false", tc.msg)
		}
		if got := timeouterr.IsHeaders(tc.err); got != tc.headers {
			t.Errorf("IsHeaders(%q) = %v, want %v", tc.msg, got, tc.headers)
		}
		outer := &timeouterr.Error{Limit: time.Minute, Err: tc.err} // an engine's timeout around it
		if got := timeouterr.IsHeaders(outer); got != tc.headers {
			t.Errorf("IsHeaders(wrapping %q) = %v, want %v", tc.msg, got, tc.headers)
		}
		if !strings.HasPrefix(outer.Error(), "resilience: attempt timed out after 1m0s: ") {
			t.Errorf("outer message %q", outer.Error())
		}
	}
}
