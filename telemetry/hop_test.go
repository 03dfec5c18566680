package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/transport"
)

// The hop protocol in the metrics and spans (issue #38).

// A peer's 503 with pushback: gotry.request.duration counts the request
// under gotry_reason="pushback", and gotry.attempts its one attempt, as
// retryable: the answer is not retried, and it is no success.
func TestMetricsShowPushbackAnswers(t *testing.T) {
	r := newRig(t)
	getFromAPeerPushingBack(t, r)
	rm := r.collect(t)
	_, reqs := find(t, rm, MetricRequestDuration)
	if len(reqs) != 1 || reqs[0].count != 1 || !reqs[0].attrs.HasValue(KeyReason) {
		t.Fatalf("%s: %d points, want one", MetricRequestDuration, len(reqs))
	}
	if v, _ := reqs[0].attrs.Value(KeyReason); v.AsString() != "pushback" {
		t.Errorf("%s: %s %q, want pushback", MetricRequestDuration, KeyReason, v.AsString())
	}
	_, atts := find(t, rm, MetricAttempts)
	if len(atts) != 1 || atts[0].value != 1 {
		t.Fatalf("%s: %d points, want one attempt", MetricAttempts, len(atts))
	}
	if v, _ := atts[0].attrs.Value(KeyAttemptOutcome); v.AsString() != "retryable" {
		t.Errorf("%s: %s %q, want retryable", MetricAttempts, KeyAttemptOutcome, v.AsString())
	}
}

// getFromAPeerPushingBack makes one request through a transport with r's
// telemetry to a peer that answers 503 with pushback.
func getFromAPeerPushingBack(t *testing.T, r *rig) {
	t.Helper()
	srv := newServer(t, status(503, transport.PushbackHeader, transport.PushbackRetried), status(200))
	tr := transport.New(base(t), r.tel.Transport(), transport.WithHopPeers(func(string) bool { return true }))
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
}

// callUnderMiddleware serves a caller's request carrying 30 s in
// transport.TimeoutHeader with a handler behind transport.Middleware
// (trusting callers as trusted says, with opts) that GETs url through tr
// with the request's context.
func callUnderMiddleware(t *testing.T, tr http.RoundTripper, url string, trusted func(*http.Request) bool, opts ...transport.Option) {
	t.Helper()
	opts = append([]transport.Option{transport.WithTrustedCallers(trusted)}, opts...)
	h := transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, in *http.Request) {
		req, _ := http.NewRequestWithContext(in.Context(), http.MethodGet, url, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return
		}
		drain(t, resp)
	}), opts...)
	in := httptest.NewRequest(http.MethodGet, "/", nil)
	in.Header.Set(transport.TimeoutHeader, "30000")
	h.ServeHTTP(httptest.NewRecorder(), in)
}

// A call made under transport.Middleware for a trusted caller that sent
// transport.TimeoutHeader shows the time it had left of that propagated
// deadline on its request span.
func TestTraceTimeLeftOfAPropagatedDeadline(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	tr := transport.New(base(t), r.tel.Transport())
	callUnderMiddleware(t, tr, srv.URL, func(*http.Request) bool { return true })
	spans := ordered(r.waitEnded(t, 2), "gotry GET")
	if left := attrs(spans[0].Attributes())[keyTimeLeft].AsFloat64(); left <= 25 || left > 30 {
		t.Errorf("%s = %v, want just under the caller's 30", keyTimeLeft, left)
	}
}

// A deadline a trusted caller propagated through transport.Middleware
// shows in gotry.request.time_left of the calls made under it: exactly
// the caller's 30 s, with Middleware and the transport on one fake clock
// that never moves. An untrusted caller's header is ignored, so its
// request has no deadline and records nothing.
func TestMetricsTimeLeftOfAPropagatedDeadline(t *testing.T) {
	tests := []struct {
		name    string
		trusted func(*http.Request) bool
		count   uint64
		sum     float64
	}{
		{"trusted caller", func(*http.Request) bool { return true }, 1, 30},
		{"untrusted caller", nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			srv := newServer(t, status(200))
			fc := clock.NewFake(time.Now())
			tr := transport.New(base(t), r.tel.Transport(), transport.WithClock(fc))
			callUnderMiddleware(t, tr, srv.URL, tc.trusted, transport.WithClock(fc))
			ps := timeLeftPoints(t, r.collect(t))
			var count uint64
			var sum float64
			for _, p := range ps {
				count += p.Count
				sum += p.Sum
			}
			if count != tc.count || sum != tc.sum {
				t.Errorf("%s: %d requests summing to %vs, want %d summing to %vs", MetricRequestTimeLeft, count, sum, tc.count, tc.sum)
			}
		})
	}
}
