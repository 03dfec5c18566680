package telemetry

import (
	"log"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"

	"github.com/MrVSiK/gotry/transport"
)

// spanning is a middleware that runs each request under a span of its own,
// INTERNAL, and, when inject is set, propagates that span in the copy it
// sends on (as a tracing middleware other than otelhttp would).
type spanning struct {
	rt     http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	inject bool
}

func (m spanning) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, s := m.tracer.Start(r.Context(), "middleware", trace.WithSpanKind(trace.SpanKindInternal))
	defer s.End()
	r = r.Clone(ctx)
	if m.inject {
		m.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	return m.rt.RoundTrip(r)
}

// TestSpansBelowFoundAtRunTime: otelhttp behind a middleware gotry cannot
// see through is found from the first response. That attempt has two
// CLIENT spans (gotry's, otelhttp's under it: gotry could not know before
// sending); from then on each attempt has one, otelhttp's, carrying gotry's
// attempt attributes, gotry stops recording http.client.request.duration
// (otelhttp records it), and one warning says so, naming the transport.
func TestSpansBelowFoundAtRunTime(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	inner := otelhttp.NewTransport(base(t), otelhttp.WithTracerProvider(r.tp),
		otelhttp.WithPropagators(r.prop), otelhttp.WithMeterProvider(r.mp))
	tr := transport.New(opaque{inner}, r.tel.Transport(Name("payments")))
	for range 3 {
		resp, err := get(t, tr, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, resp)
		waitFor(t, r.settled)
	}
	spans := r.rec.Ended()
	// 3 requests: the first's attempt twice, the others' once.
	if n := clientSpans(spans); n != 4 {
		t.Errorf("%d CLIENT spans for 3 attempts, want 4: the first doubled, then one each:\n%s", n, tree(spans))
	}
	atts := ordered(spans, "HTTP GET")
	if len(atts) != 3 {
		t.Fatalf("%d otelhttp spans, want 3:\n%s", len(atts), tree(spans))
	}
	for i, s := range atts[1:] {
		want(t, "otelhttp's span after the detection", s.Attributes(), map[attribute.Key]any{KeyAttemptOutcome: "success"})
		if p := s.Parent().SpanID(); p != ordered(spans, "gotry GET")[i+1].SpanContext().SpanID() {
			t.Errorf("request %d: otelhttp's span is not the request span's child:\n%s", i+2, tree(spans))
		}
	}
	wantTraceparents(t, srv, atts) // the server's parent is otelhttp's span each time

	lines := r.logs.FilterMessage(MsgSpansBelow).All()
	if len(lines) != 1 {
		t.Fatalf("%d %q lines after 3 requests, want 1", len(lines), MsgSpansBelow)
	}
	if lines[0].Level != zapcore.WarnLevel {
		t.Errorf("level %v, want warn", lines[0].Level)
	}
	fields := lines[0].ContextMap()
	if fields[string(KeyTransport)] != "payments" || fields["server.address"] != "127.0.0.1" {
		t.Errorf("fields %v, want the transport's name and the host", fields)
	}

	// http.client.request.duration: gotry's for the first attempt only,
	// otelhttp's for all three; each later attempt counted once.
	counts := map[string]uint64{}
	for _, sm := range r.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == MetricHTTPClientRequestDuration {
				for _, p := range h.DataPoints {
					counts[sm.Scope.Name] += p.Count
				}
			}
		}
	}
	if counts[ScopeName] != 1 {
		t.Errorf("gotry recorded %d attempts in %s, want 1 (only before it knew)", counts[ScopeName], MetricHTTPClientRequestDuration)
	}
	if n := len(counts); n != 2 {
		t.Errorf("%s from %d scopes, want gotry's and otelhttp's: %v", MetricHTTPClientRequestDuration, n, counts)
	}
}

// TestSpansBelowNeedsATraceBelow: only a CLIENT span below gotry's makes
// gotry stop making attempt spans; a middleware's own INTERNAL span,
// propagated or not, leaves gotry's CLIENT span the only one. Unsampled,
// where the SDK's spans have no kind to read, the traceparent otelhttp
// re-injects still shows it (and gotry stops counting the attempts in
// http.client.request.duration, which otelhttp counts whatever the
// sampling).
func TestSpansBelowNeedsATraceBelow(t *testing.T) {
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	t.Cleanup(func() { _ = never.Shutdown(t.Context()) })
	tests := []struct {
		name    string
		opts    []Option
		wire    func(r *rig, base http.RoundTripper) http.RoundTripper
		found   bool
		clients int // CLIENT spans of the two requests together
	}{
		{"middleware's own span", nil, func(r *rig, base http.RoundTripper) http.RoundTripper {
			return spanning{rt: base, tracer: r.tp.Tracer("mw"), prop: r.prop}
		}, false, 2},
		{"middleware's own span, propagated", nil, func(r *rig, base http.RoundTripper) http.RoundTripper {
			return spanning{rt: base, tracer: r.tp.Tracer("mw"), prop: r.prop, inject: true}
		}, false, 2},
		{"opaque middleware alone", nil, func(_ *rig, base http.RoundTripper) http.RoundTripper {
			return opaque{base}
		}, false, 2},
		{"otelhttp below, unsampled", []Option{WithTracerProvider(never)}, func(r *rig, base http.RoundTripper) http.RoundTripper {
			return opaque{otelhttp.NewTransport(base, otelhttp.WithTracerProvider(never), otelhttp.WithPropagators(r.prop))}
		}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opts...)
			srv := newServer(t, status(200))
			tr := transport.New(tc.wire(r, base(t)), r.tel.Transport())
			for range 2 {
				resp, err := get(t, tr, srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				drain(t, resp)
				waitFor(t, r.settled)
			}
			if got := len(r.logs.FilterMessage(MsgSpansBelow).All()) == 1; got != tc.found {
				t.Errorf("found spans below: %v, want %v", got, tc.found)
			}
			if n := clientSpans(r.rec.Ended()); n != tc.clients {
				t.Errorf("%d CLIENT spans, want %d:\n%s", n, tc.clients, tree(r.rec.Ended()))
			}
		})
	}
}

// errorRecorder is an otel.ErrorHandler that keeps what it is given and
// passes it to the standard logger, as otel's default handler does.
type errorRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorRecorder) Handle(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
	log.Print(err)
}

func (e *errorRecorder) all() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// Without a logger the warning goes to otel.Handle, once: a user who set
// up traces but no logs still hears of it.
func TestSpansBelowWithoutLoggerGoesToOtelHandle(t *testing.T) {
	rec := &errorRecorder{}
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(rec)
	t.Cleanup(func() { otel.SetErrorHandler(prev) })

	r := newRig(t)
	tel := New(WithTracerProvider(r.tp), WithMeterProvider(r.mp), WithPropagators(r.prop)) // no logger
	srv := newServer(t, status(200))
	inner := otelhttp.NewTransport(base(t), otelhttp.WithTracerProvider(r.tp), otelhttp.WithPropagators(r.prop))
	tr := transport.New(opaque{inner}, tel.Transport(Name("search")))
	for range 2 {
		resp, err := get(t, tr, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, resp)
	}
	var got []string
	for _, err := range rec.all() {
		if strings.HasPrefix(err.Error(), MsgSpansBelow) {
			got = append(got, err.Error())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], `gotry.transport="search"`) {
		t.Errorf("otel.Handle got %q, want one warning naming the transport", got)
	}
}
