package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Two retries: the first waits for "Retry-After: 1", the second for the
// constant backoff; the third attempt succeeds.
func TestTraceRetriesWithRetryAfterAndBackoff(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503, "Retry-After", "1"), status(503), status(200))
	tr := transport.New(base(t), r.tel.Transport(),
		transport.WithBackoff(resilience.Constant(5*time.Millisecond)), transport.WithMaxRetryAfter(2*time.Second))

	resp, err := get(t, tr, srv.URL+"/pay/42?token=secret&sig=abc#frag")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.rec.Ended()); got != 5 {
		t.Fatalf("before the body is closed: %d spans ended, want 5 (all but the winner):\n%s", got, tree(r.rec.Ended()))
	}
	drain(t, resp)
	spans := r.waitEnded(t, 6)

	const wantTree = "gotry GET internal\n" +
		"  GET client\n" +
		"  gotry backoff internal\n" +
		"  GET client\n" +
		"  gotry backoff internal\n" +
		"  GET client\n"
	if got := tree(spans); got != wantTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, wantTree)
	}
	port := srv.port(t)
	root := ordered(spans, "gotry GET")[0]
	want(t, "request span", root.Attributes(), map[attribute.Key]any{
		keyMethod: "GET", keyServerAddress: "127.0.0.1", keyServerPort: int64(port),
		KeyAttempts: int64(3), KeyRetries: int64(2), KeyHedges: nil, KeyReason: "success",
		keyStatusCode: int64(200), KeyErrorType: nil, keyURLFull: nil,
	})
	// The planned delays add up to 1.005 s; the time spent retaining each
	// superseded response counts against its delay (so the sleeps may be a
	// little shorter on a loaded machine), and real sleeps may overrun.
	if bt := attrs(root.Attributes())[keyBackoffTotal].AsFloat64(); bt < 0.95 || bt > 2 {
		t.Errorf("gotry.backoff.total = %v, want about 1.005", bt)
	}
	if root.Status().Code != codes.Unset {
		t.Errorf("request span status %v, want unset", root.Status())
	}
	var events []string
	for _, e := range root.Events() {
		events = append(events, e.Name+" "+attrs(e.Attributes)[KeyDelaySource].AsString()+" "+attrs(e.Attributes)[KeyRetryTrigger].AsString())
	}
	if want := []string{"gotry.retry retry_after 5xx", "gotry.retry backoff 5xx"}; !equal(events, want) {
		t.Errorf("request span events %q, want %q", events, want)
	}

	atts := ordered(spans, "GET")
	url := srv.URL + "/pay/42?token=secret&sig=REDACTED" // only the convention's sensitive parameters are redacted
	want(t, "attempt 1", atts[0].Attributes(), map[attribute.Key]any{
		keyMethod: "GET", keyServerAddress: "127.0.0.1", keyServerPort: int64(port), keyURLFull: url,
		keyResendCount: nil, KeyAttemptKind: nil, KeyAttemptOutcome: "retryable",
		keyStatusCode: int64(503), KeyErrorType: "503", KeyAttemptProbe: nil,
	})
	want(t, "attempt 2", atts[1].Attributes(), map[attribute.Key]any{
		keyResendCount: int64(1), KeyAttemptKind: "retry", KeyAttemptOutcome: "retryable", keyStatusCode: int64(503),
	})
	want(t, "attempt 3", atts[2].Attributes(), map[attribute.Key]any{
		keyResendCount: int64(2), KeyAttemptKind: "retry", KeyAttemptOutcome: "success",
		keyStatusCode: int64(200), KeyErrorType: nil, keyURLFull: url,
	})
	for i, s := range atts {
		wantCode := codes.Error
		if i == 2 {
			wantCode = codes.Unset
		}
		if s.Status().Code != wantCode {
			t.Errorf("attempt %d status %v, want %v", i+1, s.Status().Code, wantCode)
		}
	}
	if !atts[2].EndTime().After(root.EndTime()) {
		t.Errorf("winner ended %v, before the request span %v: it must end with the body", atts[2].EndTime(), root.EndTime())
	}

	backoffs := ordered(spans, BackoffSpanName)
	want(t, "backoff 1", backoffs[0].Attributes(), map[attribute.Key]any{
		keyBackoffDelay: 1.0, KeyBackoffRetryAfter: true, KeyBackoffInterrupted: false,
	})
	want(t, "backoff 2", backoffs[1].Attributes(), map[attribute.Key]any{
		keyBackoffDelay: 0.005, KeyBackoffRetryAfter: false, KeyBackoffInterrupted: false,
	})
	for i, b := range backoffs {
		if !b.StartTime().After(atts[i].StartTime()) || !b.EndTime().Before(atts[i+1].StartTime().Add(time.Millisecond)) {
			t.Errorf("backoff %d [%v, %v] not between attempts %d and %d", i+1, b.StartTime(), b.EndTime(), i+1, i+2)
		}
	}

	wantTraceparents(t, srv, atts)
}

// A hedge wins; the stalled first attempt is cancelled, which is no error.
func TestTraceHedgeWinsLoserCancelled(t *testing.T) {
	r := newRig(t)
	done := make(chan struct{})
	srv := newServer(t, stall(done), status(200))
	t.Cleanup(func() { close(done) }) // runs before srv.Close
	tr := transport.New(base(t), r.tel.Transport(),
		transport.WithHedging(20*time.Millisecond, 1), transport.WithMaxAttempts(2))

	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 3)

	const wantTree = "gotry GET internal\n" +
		"  GET client\n" +
		"  GET client\n"
	if got := tree(spans); got != wantTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, wantTree)
	}
	root := ordered(spans, "gotry GET")[0]
	want(t, "request span", root.Attributes(), map[attribute.Key]any{
		KeyAttempts: int64(2), KeyRetries: nil, KeyHedges: int64(1), KeyReason: "success", keyStatusCode: int64(200),
	})
	if len(root.Events()) != 1 || root.Events()[0].Name != "gotry.hedge" {
		t.Errorf("request span events %v, want one gotry.hedge", root.Events())
	} else {
		want(t, "hedge event", root.Events()[0].Attributes, map[attribute.Key]any{keyAttempt: int64(2), keyHedgeInFlight: int64(2)})
	}
	atts := ordered(spans, "GET")
	want(t, "loser", atts[0].Attributes(), map[attribute.Key]any{
		KeyAttemptKind: nil, KeyAttemptOutcome: "cancelled", KeyErrorType: nil, keyStatusCode: nil, keyResendCount: nil,
	})
	if atts[0].Status().Code != codes.Unset {
		t.Errorf("loser status %v, want unset: a cancelled hedge loser is not an error", atts[0].Status())
	}
	want(t, "winner", atts[1].Attributes(), map[attribute.Key]any{
		KeyAttemptKind: "hedge", KeyAttemptOutcome: "success", keyResendCount: int64(1), keyStatusCode: int64(200),
	})
	wantTraceparents(t, srv, atts)
}

// breakerRig is a traced transport with a breaker that one failure opens,
// on a fake clock, before a server that answers 503 and then 200.
func breakerRig(t *testing.T) (*rig, *server, *clock.Fake, *transport.Transport) {
	t.Helper()
	r := newRig(t)
	srv := newServer(t, status(503), status(200))
	fc := clock.NewFake(time.Unix(1000, 0))
	tr := transport.New(base(t), r.tel.Transport(), transport.WithMaxAttempts(1), transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: breakerOpen}))
	return r, srv, fc, tr
}

// The breaker opens on a 503, rejects the next request without an attempt
// span, and after OpenDuration lets a probe through.
func TestTraceBreakerRejectionAndProbe(t *testing.T) {
	r, srv, fc, tr := breakerRig(t)

	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	if _, err := get(t, tr, srv.URL); !errors.Is(err, transport.ErrCircuitOpen) {
		t.Fatalf("second request: %v, want ErrorTypeCircuitOpen", err)
	}
	fc.Advance(breakerOpen)
	resp, err = get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 5)

	const wantTree = "gotry GET internal\n" +
		"  GET client\n" +
		"gotry GET internal\n" +
		"gotry GET internal\n" +
		"  GET client\n"
	if got := tree(spans); got != wantTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, wantTree)
	}
	roots := ordered(spans, "gotry GET")
	want(t, "first", roots[0].Attributes(), map[attribute.Key]any{
		KeyReason: "attempts_exhausted", keyStatusCode: int64(503), KeyErrorType: "503", KeyAttempts: int64(1),
	})
	want(t, "rejected", roots[1].Attributes(), map[attribute.Key]any{
		KeyReason: "circuit_open", KeyErrorType: "circuit_open", KeyBreakerState: "open",
		KeyAttempts: int64(0), keyStatusCode: nil,
	})
	if roots[1].Status().Code != codes.Error {
		t.Errorf("rejected request status %v, want error", roots[1].Status())
	}
	want(t, "probe request", roots[2].Attributes(), map[attribute.Key]any{KeyReason: "success", keyStatusCode: int64(200)})
	atts := ordered(spans, "GET")
	want(t, "probe", atts[1].Attributes(), map[attribute.Key]any{KeyAttemptProbe: true, KeyAttemptOutcome: "success"})
	want(t, "first attempt", atts[0].Attributes(), map[attribute.Key]any{KeyAttemptProbe: nil})
}

// The generic Retrier's calls get the same tree with gotry.operation.
func TestTraceRetrierCall(t *testing.T) {
	r := newRig(t)
	rt := resilience.NewRetrier(r.tel.Retrier(),
		resilience.WithBackoff(resilience.Constant(2*time.Millisecond)), resilience.WithMaxAttempts(3))
	n := 0
	v, err := resilience.Retry(context.Background(), rt, "load-config", func(ctx context.Context) (string, error) {
		n++
		if n < 3 {
			return "", errors.New("flaky")
		}
		return "ok", nil
	})
	if err != nil || v != "ok" {
		t.Fatalf("Retry = %q, %v", v, err)
	}
	spans := r.waitEnded(t, 6)
	const wantTree = "gotry load-config internal\n" +
		"  gotry load-config attempt internal\n" +
		"  gotry backoff internal\n" +
		"  gotry load-config attempt internal\n" +
		"  gotry backoff internal\n" +
		"  gotry load-config attempt internal\n"
	if got := tree(spans); got != wantTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, wantTree)
	}
	want(t, "call", ordered(spans, "gotry load-config")[0].Attributes(), map[attribute.Key]any{
		KeyOperation: "load-config", KeyAttempts: int64(3), KeyRetries: int64(2), KeyReason: "success", keyMethod: nil,
	})
	atts := ordered(spans, "gotry load-config attempt")
	want(t, "attempt 1", atts[0].Attributes(), map[attribute.Key]any{
		KeyOperation: "load-config", KeyAttemptKind: "initial", KeyAttemptOutcome: "retryable", KeyErrorType: ErrorTypeOther, keyResendCount: nil,
	})
	want(t, "attempt 3", atts[2].Attributes(), map[attribute.Key]any{KeyAttemptKind: "retry", KeyAttemptOutcome: "success", KeyErrorType: nil})
}

// When tracing is off (no provider), nothing breaks and metrics still flow.
func TestNoTracingStillCounts(t *testing.T) {
	r := newRig(t, WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))))
	srv := newServer(t, status(503), status(200))
	tr := transport.New(base(t), r.tel.Transport(), transport.WithBackoff(resilience.Constant(time.Millisecond)))
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	if got := sumCounter(t, r.collect(t), MetricAttempts); got != 2 {
		t.Errorf("gotry.attempts = %d, want 2", got)
	}
	for _, p := range srv.traceparents() {
		if p == "" {
			t.Error("unsampled attempt sent no traceparent; the context must still propagate")
		}
	}
}

func equal(a, b []string) bool {
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

// Two Telemetry values hooked into one transport keep separate state: each
// records its own request and attempt span and counts the attempt once.
func TestTwoTelemetriesOnOneTransport(t *testing.T) {
	r1, r2 := newRig(t), newRig(t)
	srv := newServer(t, status(200))
	tr := transport.New(base(t), r1.tel.Transport(), r2.tel.Transport())
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	for i, r := range []*rig{r1, r2} {
		spans := r.waitEnded(t, 2)
		if len(ordered(spans, "gotry GET")) != 1 || len(ordered(spans, "GET")) != 1 {
			t.Errorf("telemetry %d recorded:\n%s", i+1, tree(spans))
		}
		if n := sumCounter(t, r.collect(t), MetricAttempts); n != 1 {
			t.Errorf("telemetry %d counted %d attempts, want 1", i+1, n)
		}
	}
}

// A retried attempt's span ends when its result is known (its response read
// into memory and closed), before the backoff span that follows it, and
// carries its time to response headers and protocol version. Timed on a
// fake clock shared by the transport and telemetry.
func TestTraceRetriedAttemptEndsBeforeItsBackoff(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	r := newRig(t, WithClock(fc))
	srv := newServer(t, status(503), status(200))
	tr := transport.New(base(t), r.tel.Transport(), transport.WithClock(fc),
		transport.WithBackoff(resilience.Constant(300*time.Millisecond)))

	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := get(t, tr, srv.URL)
		done <- result{resp, err}
	}()
	if !fc.WaitForTimers(1, 5*time.Second) {
		t.Fatal("the backoff never started")
	}
	fc.Advance(300 * time.Millisecond)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	drain(t, res.resp)
	spans := r.waitEnded(t, 4)

	atts := ordered(spans, "GET")
	backoff := ordered(spans, BackoffSpanName)[0]
	if end, start := atts[0].EndTime(), backoff.StartTime(); end.After(start) {
		t.Errorf("retried attempt ended at %v, after its backoff started at %v", end.Sub(time.Unix(1000, 0)), start.Sub(time.Unix(1000, 0)))
	}
	if !atts[1].StartTime().Equal(time.Unix(1000, 0).Add(300 * time.Millisecond)) {
		t.Errorf("retry started at %v, want 300ms on the fake clock", atts[1].StartTime().Sub(time.Unix(1000, 0)))
	}
	for i, s := range atts {
		want(t, "attempt "+strconv.Itoa(i+1), s.Attributes(), map[attribute.Key]any{
			keyAttemptTimeToHeaders: 0.0, keyProtocolVersion: "1.1",
		})
	}
}

// An attempt that ended without a response has no time to headers nor
// protocol version.
func TestTraceAttemptErrorHasNoTimeToHeaders(t *testing.T) {
	r := newRig(t)
	tr := transport.New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("boom")
	}), r.tel.Transport(), transport.WithMaxAttempts(1))
	if _, err := get(t, tr, "http://example.invalid/"); err == nil {
		t.Fatal("want an error")
	}
	spans := r.waitEnded(t, 2)
	want(t, "attempt", ordered(spans, "GET")[0].Attributes(), map[attribute.Key]any{
		keyAttemptTimeToHeaders: nil, keyProtocolVersion: nil,
	})
}

// Each breaker transition is an event on the span of the request that
// caused it, and its log line carries that span's trace_id and span_id.
func TestTraceBreakerTransitionsOnTheMovingRequest(t *testing.T) {
	r, srv, fc, tr := breakerRig(t)
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	fc.Advance(breakerOpen)
	resp, err = get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 4)

	roots := ordered(spans, "gotry GET")
	type move struct{ root, from, to string }
	wantMoves := []move{{"first", "closed", "open"}, {"probe", "open", "half-open"}, {"probe", "half-open", "closed"}}
	var got []move
	for i, root := range roots {
		for _, e := range root.Events() {
			if e.Name != EventBreakerStateChange {
				continue
			}
			m := attrs(e.Attributes)
			got = append(got, move{[]string{"first", "probe"}[i], m[KeyBreakerFrom].AsString(), m[KeyBreakerTo].AsString()})
			want(t, "transition event", e.Attributes, map[attribute.Key]any{
				keyServerAddress: "127.0.0.1", keyServerPort: int64(srv.port(t)),
			})
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(wantMoves) {
		t.Errorf("transition events %v, want %v", got, wantMoves)
	}
	opened := lines(r.logs, MsgBreakerState)[0].ContextMap()
	sc := roots[0].SpanContext()
	if opened["trace_id"] != sc.TraceID().String() || opened["span_id"] != sc.SpanID().String() {
		t.Errorf("breaker opened line trace %v/%v, want the first request span's %v/%v",
			opened["trace_id"], opened["span_id"], sc.TraceID(), sc.SpanID())
	}
}

// A request whose first attempt succeeds, the common case: each span has
// at most 8 attributes (past 8, the SDK deduplicates a span's attributes for
// its processors in a map on the heap), and nothing is lost, since the
// counts left off are zero and the attempt without a resend count and kind
// is the first.
func TestTraceFirstAttemptSuccessFitsEightAttributes(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	tr := transport.New(base(t), r.tel.Transport())
	resp, err := get(t, tr, srv.URL+"/items")
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 2)
	root, att := ordered(spans, "gotry GET")[0], ordered(spans, "GET")[0]
	port := srv.port(t)
	want(t, "request span", root.Attributes(), map[attribute.Key]any{
		keyMethod: "GET", keyServerAddress: "127.0.0.1", keyServerPort: int64(port),
		KeyAttempts: int64(1), KeyReason: "success", keyStatusCode: int64(200),
		KeyRetries: nil, KeyHedges: nil, keyBackoffTotal: nil, KeyErrorType: nil,
	})
	want(t, "attempt span", att.Attributes(), map[attribute.Key]any{
		keyMethod: "GET", keyServerAddress: "127.0.0.1", keyServerPort: int64(port),
		keyURLFull: srv.URL + "/items", KeyAttemptOutcome: "success", keyStatusCode: int64(200),
		keyProtocolVersion: "1.1", KeyAttemptKind: nil, keyResendCount: nil,
	})
	if _, ok := attrs(att.Attributes())[keyAttemptTimeToHeaders]; !ok {
		t.Error("attempt span: no gotry.attempt.time_to_headers")
	}
	for _, s := range []sdktrace.ReadOnlySpan{root, att} {
		if n := len(s.Attributes()); n > 8 {
			t.Errorf("%s: %d attributes, want at most 8: %v", s.Name(), n, s.Attributes())
		}
	}
}

// TestTraceEmptyResponseEndsWithRoundTrip: a response with nothing to read
// (a 204: http.NoBody) ends the request span and its attempt span as
// RoundTrip returns, before (and whether or not) the caller closes it.
func TestTraceEmptyResponseEndsWithRoundTrip(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(204))
	tr := transport.New(base(t), r.tel.Transport())
	resp, err := get(t, tr, srv.URL+"/nothing")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d, want 204", resp.StatusCode)
	}
	if got := tree(r.rec.Ended()); got != "gotry GET internal\n  GET client\n" {
		t.Fatalf("spans ended as RoundTrip returned:\n%s\nwant the request span and its attempt", got)
	}
	resp.Body.Close()
}

// A peer's answer with pushback: the attempt span says so, and the
// request ends with the reason pushback after that one attempt.
func TestTracePushbackFromAPeer(t *testing.T) {
	r := newRig(t)
	getFromAPeerPushingBack(t, r)
	spans := r.waitEnded(t, 2)
	want(t, "request span", ordered(spans, "gotry GET")[0].Attributes(), map[attribute.Key]any{
		KeyAttempts: int64(1), KeyReason: "pushback", keyStatusCode: int64(503),
	})
	want(t, "attempt", ordered(spans, "GET")[0].Attributes(), map[attribute.Key]any{
		KeyAttemptOutcome: "retryable", KeyAttemptPushback: true, keyStatusCode: int64(503),
	})
}

// A request whose context has a deadline (under transport.Middleware, the
// caller's propagated one) shows the time it had left on its span; one
// without shows none.
func TestTraceRequestTimeLeft(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	tr := transport.New(base(t), r.tel.Transport())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []context.Context{ctx, context.Background()} {
		req, _ := http.NewRequestWithContext(c, http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, resp)
	}
	spans := ordered(r.waitEnded(t, 4), "gotry GET")
	left := attrs(spans[0].Attributes())[keyTimeLeft].AsFloat64()
	if left <= 50 || left > 60 {
		t.Errorf("%s = %v, want just under 60", keyTimeLeft, left)
	}
	want(t, "no deadline", spans[1].Attributes(), map[attribute.Key]any{keyTimeLeft: nil})
}
