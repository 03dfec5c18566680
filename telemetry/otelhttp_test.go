package telemetry

import (
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
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
		KeyResendCount: nil, KeyAttemptKind: "initial", KeyAttemptOutcome: "retryable", KeyStatusCode: int64(503),
	})
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
// annotated; the loser's outcome is missing because otelhttp ended its span
// on the cancellation error before gotry classified it (see README).
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
	want(t, "loser", atts[0].Attributes(), map[attribute.Key]any{KeyAttemptKind: "initial", KeyAttemptOutcome: nil})
	want(t, "winner", atts[1].Attributes(), map[attribute.Key]any{
		KeyAttemptKind: "hedge", KeyResendCount: int64(1), KeyAttemptOutcome: "success",
	})
}
