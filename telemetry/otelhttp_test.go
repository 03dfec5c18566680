package telemetry

import (
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
	r := newRig(t, WithOtelhttpAttempts())
	srv := newServer(t, status(503), status(200))
	inner := otelhttp.NewTransport(r.tel.AttemptAnnotator(base(t)),
		otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	tr := transport.New(inner, transport.WithHooks(r.tel.Hooks()),
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
		KeyResendCount: nil, KeyAttemptKind: nil, KeyAttemptOutcome: "retryable", KeyStatusCode: int64(503),
	})
	if _, ok := attrs(atts[0].Attributes())[KeyAttemptTimeToHeaders]; !ok {
		t.Errorf("attempt 1 has no %s", KeyAttemptTimeToHeaders)
	}
	// otelhttp's span ends with the body, which the transport reads and
	// closes before the backoff: the retried attempt ends before it.
	if b := ordered(spans, BackoffSpanName)[0]; atts[0].EndTime().After(b.StartTime()) {
		t.Errorf("retried attempt's otelhttp span ended %v after its backoff started", atts[0].EndTime().Sub(b.StartTime()))
	}
	want(t, "attempt 2", atts[1].Attributes(), map[attribute.Key]any{
		KeyResendCount: int64(1), KeyAttemptKind: "retry", KeyAttemptOutcome: "success", KeyStatusCode: int64(200),
	})
	wantTraceparents(t, srv, atts)
	// otelhttp records http.client.request.duration; gotry must not too.
	for _, sm := range r.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricHTTPClientRequestDuration {
				t.Errorf("gotry recorded %s in otelhttp mode: each attempt would count twice", m.Name)
			}
		}
	}
}

// otelhttp → gotry → base: otelhttp's CLIENT span is the parent of gotry's
// request span, whose CLIENT attempt spans are what the server sees.
func TestOtelhttpOutside(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503), status(200))
	gotry := transport.New(base(t), transport.WithHooks(r.tel.Hooks()),
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
		{"otelhttp mode without otelhttp", []Option{WithOtelhttpAttempts()}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opts...)
			srv := newServer(t, status(200))
			tr := transport.New(r.tel.AttemptAnnotator(base(t)), transport.WithHooks(r.tel.Hooks()))
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
	r := newRig(t, WithOtelhttpAttempts())
	done := make(chan struct{})
	srv := newServer(t, stall(done), status(200))
	t.Cleanup(func() { close(done) })
	inner := otelhttp.NewTransport(r.tel.AttemptAnnotator(base(t)),
		otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	tr := transport.New(inner, transport.WithHooks(r.tel.Hooks()),
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
		KeyAttemptKind: "hedge", KeyResendCount: int64(1), KeyAttemptOutcome: "success",
	})
}

// gotry → otelhttp without WithOtelhttpAttempts: Hooks alone would give each
// attempt two CLIENT spans (gotry's and otelhttp's); HooksFor(base) finds
// otelhttp in the base, through Unwrap too, and gotry makes none.
func TestOtelhttpInsideDetected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hooks   func(r *rig, base http.RoundTripper) transport.Hooks
		clients int
	}{
		{"Hooks", func(r *rig, _ http.RoundTripper) transport.Hooks { return r.tel.Hooks() }, 4},
		{"HooksFor", func(r *rig, base http.RoundTripper) transport.Hooks { return r.tel.HooksFor(base) }, 2},
		{"HooksFor through Unwrap", func(r *rig, base http.RoundTripper) transport.Hooks {
			return r.tel.HooksFor(r.tel.AttemptAnnotator(base))
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			srv := newServer(t, status(503), status(200))
			inner := otelhttp.NewTransport(base(t), otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
			tr := transport.New(inner, transport.WithHooks(tc.hooks(r, inner)),
				transport.WithBackoff(resilience.Constant(time.Millisecond)))
			resp, err := get(t, tr, srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			drain(t, resp)
			spans := r.waitEnded(t, 2+tc.clients)
			if n := clientSpans(spans); n != tc.clients {
				t.Errorf("%d CLIENT spans for 2 attempts, want %d:\n%s", n, tc.clients, tree(spans))
			}
		})
	}
}

// HooksFor a base without otelhttp is Hooks: gotry makes the attempt spans.
func TestHooksForPlainBase(t *testing.T) {
	if wrapsOtelhttp(http.DefaultTransport) || wrapsOtelhttp(nil) {
		t.Error("a plain base taken for otelhttp")
	}
}
