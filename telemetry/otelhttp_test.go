package telemetry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

func clientSpans(spans []sdktrace.ReadOnlySpan) int {
	n := 0
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindClient {
			n++
		}
	}
	return n
}

// gotry → otelhttp → base: otelhttp's span is the one CLIENT span per
// attempt, and it carries gotry's attempt attributes.
func TestOtelhttpInside(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503), status(200))
	inner := otelhttp.NewTransport(r.tel.AttemptAnnotator(base(t)),
		otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	tr := transport.New(inner, r.tel.Transport(),
		transport.WithBackoff(resilience.Constant(5*time.Millisecond)))

	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 4)

	const wantTree = "gotry GET internal\n" +
		"  HTTP GET client\n" +
		"  gotry backoff internal\n" +
		"  HTTP GET client\n"
	if got := tree(spans); got != wantTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, wantTree)
	}
	if n := clientSpans(spans); n != 2 {
		t.Errorf("%d CLIENT spans, want 2: one per attempt, no duplicates", n)
	}
	atts := ordered(spans, "HTTP GET")
	want(t, "attempt 1", atts[0].Attributes(), map[attribute.Key]any{
		keyResendCount: nil, KeyAttemptKind: nil, KeyAttemptOutcome: "retryable", keyStatusCode: int64(503),
	})
	if _, ok := attrs(atts[0].Attributes())[keyAttemptTimeToHeaders]; !ok {
		t.Errorf("attempt 1 has no %s", keyAttemptTimeToHeaders)
	}
	// otelhttp's span ends with the body, which the transport reads and
	// closes before the backoff: the retried attempt ends before it.
	if b := ordered(spans, BackoffSpanName)[0]; atts[0].EndTime().After(b.StartTime()) {
		t.Errorf("retried attempt's otelhttp span ended %v after its backoff started", atts[0].EndTime().Sub(b.StartTime()))
	}
	want(t, "attempt 2", atts[1].Attributes(), map[attribute.Key]any{
		keyResendCount: int64(1), KeyAttemptKind: "retry", KeyAttemptOutcome: "success", keyStatusCode: int64(200),
	})
	wantTraceparents(t, srv, atts)
	// otelhttp records http.client.request.duration; gotry must not too.
	for _, sm := range r.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricHTTPClientRequestDuration {
				t.Errorf("gotry recorded %s under otelhttp: each attempt would count twice", m.Name)
			}
		}
	}
}

// gotry → otelhttp → base without the annotator: otelhttp's span is still
// the one CLIENT span per attempt, and gotry finds it through the response
// to give it the attempt's attributes and outcome.
func TestOtelhttpInsideWithoutAnnotator(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503), status(200))
	inner := otelhttp.NewTransport(base(t), otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	tr := transport.New(inner, r.tel.Transport(), transport.WithBackoff(resilience.Constant(time.Millisecond)))
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 4)
	if n := clientSpans(spans); n != 2 {
		t.Fatalf("%d CLIENT spans, want 2:\n%s", n, tree(spans))
	}
	atts := ordered(spans, "HTTP GET")
	want(t, "attempt 1", atts[0].Attributes(), map[attribute.Key]any{
		keyResendCount: nil, KeyAttemptKind: nil, KeyAttemptOutcome: "retryable",
	})
	want(t, "attempt 2", atts[1].Attributes(), map[attribute.Key]any{
		keyResendCount: int64(1), KeyAttemptKind: "retry", KeyAttemptOutcome: "success",
	})
	wantTraceparents(t, srv, atts)
}

// otelhttp → gotry → base: otelhttp's CLIENT span is the parent of gotry's
// request span, whose CLIENT attempt spans are what the server sees.
func TestOtelhttpOutside(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503), status(200))
	gotry := transport.New(base(t), r.tel.Transport(),
		transport.WithBackoff(resilience.Constant(5*time.Millisecond)))
	tr := otelhttp.NewTransport(gotry, otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))

	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 5)

	const wantTree = "HTTP GET client\n" +
		"  gotry GET internal\n" +
		"    GET client\n" +
		"    gotry backoff internal\n" +
		"    GET client\n"
	if got := tree(spans); got != wantTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, wantTree)
	}
	// One CLIENT span per attempt, plus otelhttp's for the logical request:
	// CLIENT under CLIENT, as telemetry/README.md says of this order.
	if n := clientSpans(spans); n != 3 {
		t.Errorf("%d CLIENT spans, want 3 (otelhttp's and one per attempt)", n)
	}
	atts := ordered(spans, "GET")
	wantTraceparents(t, srv, atts)
}

// Without otelhttp between them, the annotator changes nothing.
func TestAttemptAnnotatorAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		n    int
	}{
		{"default mode", nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opts...)
			srv := newServer(t, status(200))
			tr := transport.New(r.tel.AttemptAnnotator(base(t)), r.tel.Transport())
			resp, err := get(t, tr, srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			drain(t, resp)
			spans := r.waitEnded(t, tc.n)
			root := ordered(spans, "gotry GET")[0]
			want(t, "request span", root.Attributes(), map[attribute.Key]any{KeyAttemptKind: nil, KeyAttemptOutcome: nil})
		})
	}
}

// gotry → otelhttp with a hedge: still one CLIENT span per attempt, each
// annotated. The loser's span, which otelhttp ends on the cancellation
// error, is marked cancelled by the annotator: error.type names the lost
// attempt (not "*errors.errorString") and its status is not an error.
func TestOtelhttpInsideHedge(t *testing.T) {
	r := newRig(t)
	done := make(chan struct{})
	srv := newServer(t, stall(done), status(200))
	t.Cleanup(func() { close(done) })
	inner := otelhttp.NewTransport(r.tel.AttemptAnnotator(base(t)),
		otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	tr := transport.New(inner, r.tel.Transport(),
		transport.WithHedging(20*time.Millisecond, 1), transport.WithMaxAttempts(2))
	resp, err := get(t, tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 3)
	if n := clientSpans(spans); n != 2 {
		t.Fatalf("%d CLIENT spans, want 2:\n%s", n, tree(spans))
	}
	atts := ordered(spans, "HTTP GET")
	want(t, "loser", atts[0].Attributes(), map[attribute.Key]any{
		KeyAttemptKind: nil, KeyAttemptOutcome: "cancelled", KeyErrorType: ErrorTypeAttemptLost,
	})
	if c := atts[0].Status().Code; c == codes.Error {
		t.Errorf("loser status %v, want no error: a hedge loser is not a failure", atts[0].Status())
	}
	want(t, "winner", atts[1].Attributes(), map[attribute.Key]any{
		KeyAttemptKind: "hedge", keyResendCount: int64(1), KeyAttemptOutcome: "success",
	})
}

// unwrapper is a user's RoundTripper that wraps another and says so.
type unwrapper struct{ rt http.RoundTripper }

func (u unwrapper) RoundTrip(r *http.Request) (*http.Response, error) { return u.rt.RoundTrip(r) }
func (u unwrapper) Unwrap() http.RoundTripper                         { return u.rt }

// opaque is a user's middleware that wraps another RoundTripper and does
// not say so (no Unwrap), as most logging and auth RoundTrippers: it
// sends a copy of the request with a header of its own.
type opaque struct{ rt http.RoundTripper }

func (o opaque) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer test")
	return o.rt.RoundTrip(r)
}

// TestOneClientSpanPerAttempt: every wiring a user can write with
// Telemetry.Transport, with otelhttp below gotry, above it or absent, gives
// each physical attempt exactly one CLIENT span: the span whose context the
// server receives is CLIENT and has no CLIENT parent, and the CLIENT spans
// are one per attempt (plus otelhttp's for the logical request when it is
// above gotry). Behind an opaque middleware gotry learns of otelhttp from
// the first response (the warm-up request, whose attempt has two CLIENT
// spans; TestSpansBelowFoundAtRunTime pins that); every request after it
// has one.
func TestOneClientSpanPerAttempt(t *testing.T) {
	type wiring func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper
	otel := func(r *rig, rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	}
	gotry := func(base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
		return transport.New(base, opts...)
	}
	tests := []struct {
		name  string
		wire  wiring
		extra int  // CLIENT spans besides the attempts' own
		warm  bool // send one request first: gotry learns the layout from it
		warns int  // MsgSpansBelow lines: 1 when gotry found otelhttp at run time
	}{
		{"plain base", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(base, append(opts, r.tel.Transport())...)
		}, 0, false, 0},
		{"annotator without otelhttp", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(r.tel.AttemptAnnotator(base), append(opts, r.tel.Transport())...)
		}, 0, false, 0},
		{"otelhttp below", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(otel(r, base), append(opts, r.tel.Transport())...)
		}, 0, false, 0},
		{"otelhttp below with the annotator", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(otel(r, r.tel.AttemptAnnotator(base)), append(opts, r.tel.Transport(Name("x")))...)
		}, 0, false, 0},
		{"annotator above otelhttp (misplaced)", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(r.tel.AttemptAnnotator(otel(r, base)), append(opts, r.tel.Transport())...)
		}, 0, false, 0},
		{"otelhttp below a wrapper", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(unwrapper{otel(r, base)}, append(opts, r.tel.Transport())...)
		}, 0, false, 0},
		{"otelhttp below an opaque wrapper", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(opaque{otel(r, base)}, append(opts, r.tel.Transport())...)
		}, 0, true, 1},
		{"otelhttp with the annotator below an opaque wrapper", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(opaque{otel(r, r.tel.AttemptAnnotator(base))}, append(opts, r.tel.Transport())...)
		}, 0, true, 1},
		{"gotry over an opaque wrapper over gotry", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			inner := gotry(base, r.tel.Transport(), transport.WithMaxAttempts(1))
			return gotry(opaque{inner}, append(opts, r.tel.Transport())...)
		}, 0, true, 1},
		{"opaque wrapper, no otelhttp", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(opaque{base}, append(opts, r.tel.Transport())...)
		}, 0, true, 0},
		{"otelhttp above", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return otel(r, gotry(base, append(opts, r.tel.Transport())...))
		}, 1, false, 0},
		{"otelhttp above and below", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return otel(r, gotry(otel(r, r.tel.AttemptAnnotator(base)), append(opts, r.tel.Transport())...))
		}, 1, false, 0},
		{"option given twice", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(base, append(opts, r.tel.Transport(Name("again")), r.tel.Transport(Name("again")))...)
		}, 0, false, 0},
		{"beside other hooks", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			return gotry(base, append(opts, transport.WithHooks(transport.Hooks{OnRetry: func(resilience.RetryEvent) {}}), r.tel.Transport())...)
		}, 0, false, 0},
		{"gotry over gotry", func(r *rig, base http.RoundTripper, opts ...transport.Option) http.RoundTripper {
			inner := gotry(base, r.tel.Transport(), transport.WithMaxAttempts(1))
			return gotry(inner, append(opts, r.tel.Transport())...)
		}, 0, false, 0},
	}
	for _, tc := range tests {
		for _, hedged := range []bool{false, true} {
			name := tc.name
			opts := []transport.Option{transport.WithBackoff(resilience.Constant(time.Millisecond))}
			script := []http.HandlerFunc{status(503), status(200)} // a retry
			if hedged {
				name += ", hedged"
				done := make(chan struct{})
				t.Cleanup(func() { close(done) })
				script = []http.HandlerFunc{stall(done), status(200)} // a won hedge
				opts = append(opts, transport.WithHedging(20*time.Millisecond, 1), transport.WithMaxAttempts(2))
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t)
				srv := newServer(t, script...)
				rt := tc.wire(r, base(t), opts...)
				skip := 0 // the warm-up's spans
				if tc.warm {
					warm := newServer(t, status(200))
					resp, err := get(t, rt, warm.URL)
					if err != nil {
						t.Fatal(err)
					}
					drain(t, resp)
					waitFor(t, r.settled)
					skip = len(r.rec.Ended())
				}
				resp, err := get(t, rt, srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				drain(t, resp)
				// Each of the 2 attempts ends; so does the request span
				// (and the backoff's for the retry), and otelhttp's above.
				waitFor(t, func() bool { return len(srv.traceparents()) == 2 && r.settled() })
				spans := r.rec.Ended()[skip:]
				byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
				for _, s := range spans {
					byID[s.SpanContext().SpanID()] = s
				}
				for i, tp := range srv.traceparents() {
					var att sdktrace.ReadOnlySpan
					for _, s := range spans {
						if traceparent(s.SpanContext()) == tp {
							att = s
						}
					}
					if att == nil {
						t.Fatalf("attempt %d: the server's traceparent %q is no span's:\n%s", i+1, tp, tree(spans))
					}
					if att.SpanKind() != trace.SpanKindClient {
						t.Errorf("attempt %d: span %q is %v, want CLIENT", i+1, att.Name(), att.SpanKind())
					}
					if p, ok := byID[att.Parent().SpanID()]; ok && p.SpanKind() == trace.SpanKindClient {
						t.Errorf("attempt %d: CLIENT span %q under CLIENT span %q: two CLIENT spans for one attempt:\n%s",
							i+1, att.Name(), p.Name(), tree(spans))
					}
				}
				if n := clientSpans(spans); n != 2+tc.extra {
					t.Errorf("%d CLIENT spans, want %d:\n%s", n, 2+tc.extra, tree(spans))
				}
				if n := len(r.logs.FilterMessage(MsgSpansBelow).All()); n != tc.warns {
					t.Errorf("%d %q lines, want %d", n, MsgSpansBelow, tc.warns)
				}
			})
		}
	}
}

// A Retrier's attempts are INTERNAL spans: no CLIENT span at all.
func TestRetrierMakesNoClientSpan(t *testing.T) {
	r := newRig(t)
	rt := resilience.NewRetrier(r.tel.Retrier(), r.tel.Retrier(), resilience.WithBackoff(resilience.Constant(0)))
	n := 0
	_, err := resilience.Retry(t.Context(), rt, "load", func(context.Context) (int, error) {
		if n++; n == 1 {
			return 0, errors.New("flaky")
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	spans := r.waitEnded(t, 3) // the call's and its two attempts' (wired once)
	if c := clientSpans(spans); c != 0 {
		t.Errorf("%d CLIENT spans for a Retrier, want 0:\n%s", c, tree(spans))
	}
}

// A plain base hides no otelhttp.
func TestSpansBelowPlainBase(t *testing.T) {
	tel := New()
	if tel.spansBelow(http.DefaultTransport) || tel.spansBelow(nil) || tel.spansBelow(transport.New(nil)) {
		t.Error("a plain base taken for one that makes spans")
	}
}
