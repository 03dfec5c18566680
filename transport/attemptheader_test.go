package transport_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/transport"
)

// Every attempt carries the attempt header, numbered with its kind; the
// caller's request keeps its own headers.
func TestAttemptHeaderNumbersRetries(t *testing.T) {
	base, _ := sequence(status(503), status(503), status(200))
	log := &attemptLog{base: base}
	tr := transport.New(log, noDelay, transport.WithAttemptHeader("x-gotry-attempt"))
	req := newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil)
	req.Header.Set("X-Gotry-Attempt", "the caller's")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	var got []string
	for _, r := range log.requests() {
		got = append(got, r.Header.Get("X-Gotry-Attempt"))
	}
	if want := []string{"1; initial", "2; retry", "3; retry"}; !equalStrings(got, want) {
		t.Errorf("attempt headers %q, want %q", got, want)
	}
	if v := req.Header.Values("X-Gotry-Attempt"); len(v) != 1 || v[0] != "the caller's" {
		t.Errorf("caller's request header became %q: it must not be modified", v)
	}
}

// A hedge says so.
func TestAttemptHeaderMarksHedges(t *testing.T) {
	fc := newClock()
	arrived := make(chan struct{})
	log := &attemptLog{base: roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Header.Get("X-Attempt") == "1; initial" {
			close(arrived)
			<-r.Context().Done() // the first attempt stalls until it loses
			return nil, context.Cause(r.Context())
		}
		return fakeResponse(r, 200, "ok"), nil
	})}
	tr := transport.New(log, transport.WithClock(fc), transport.WithHedging(50*time.Millisecond, 1),
		transport.WithAttemptHeader("X-Attempt"))
	ch := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
	recv(t, arrived, "the first attempt")
	waitArmed(t, fc, 1)
	fc.Advance(50 * time.Millisecond)
	r := recv(t, ch, "the hedged response")
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	var got []string
	for _, r := range log.requests() {
		got = append(got, r.Header.Get("X-Attempt"))
	}
	if want := []string{"1; initial", "2; hedge"}; !equalStrings(got, want) {
		t.Errorf("attempt headers %q, want %q", got, want)
	}
}

// Without the option no attempt carries such a header, and the caller's
// request is passed to the base as it is.
func TestAttemptHeaderOffByDefault(t *testing.T) {
	base, _ := sequence(status(200))
	log := &attemptLog{base: base}
	tr := transport.New(log)
	req := newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := log.requests()[0]; got != req {
		t.Errorf("the base got a copy of the request, want the caller's own")
	}
}

func TestWithAttemptHeaderRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "x attempt", "x:attempt", "x-attempt\n"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithAttemptHeader(%q) did not panic", name)
				}
			}()
			transport.WithAttemptHeader(name)
		}()
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
