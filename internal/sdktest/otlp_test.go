package sdktest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// exportOK is an OTLP/HTTP collector's answer to a successful export.
func exportOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// newExporter returns an OTLP/HTTP trace exporter that sends to url through
// rt, with its own retries on or off.
func newExporter(t *testing.T, url string, rt http.RoundTripper, retries bool) *otlptrace.Exporter {
	rc := otlptracehttp.RetryConfig{Enabled: false}
	if retries {
		rc = otlptracehttp.RetryConfig{Enabled: true, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxElapsedTime: wait}
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(url+"/v1/traces"),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: rt}),
		otlptracehttp.WithRetry(rc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp
}

// spans is one finished span to export.
func spans() []sdktrace.ReadOnlySpan {
	return tracetest.SpanStubs{{Name: "app work"}}.Snapshots()
}

// TestOTLPExportRetries: an OTLP export is a POST without an idempotency
// key. Through gotry with its defaults it is sent once, whatever the
// collector answers: only the exporter's own retries (its RetryConfig)
// repeat it, each a new request to gotry. On a transport of its own with
// WithNonIdempotentRetries(true), and the exporter's retries off, gotry
// retries it on 503 and 429 (waiting out Retry-After) and on a reset
// connection, with the same body each time.
func TestOTLPExportRetries(t *testing.T) {
	tests := []struct {
		name string
		// retryPOSTs: the exporter's transport retries non-idempotent
		// requests; exporterRetries: the exporter's RetryConfig is on.
		retryPOSTs, exporterRetries bool
		steps                       []http.HandlerFunc
		wantOK                      bool
		wantCalls                   []int                // gotry's attempts per RoundTrip
		wantReason                  resilience.EndReason // the last RoundTrip's
	}{
		{
			name:      "gotry defaults, exporter retries off: sent once",
			steps:     []http.HandlerFunc{status(http.StatusServiceUnavailable, "Retry-After", "1"), exportOK},
			wantCalls: []int{1}, wantReason: resilience.ReasonNotIdempotent,
		},
		{
			name:      "gotry defaults, reset connection: sent once",
			steps:     []http.HandlerFunc{reset, exportOK},
			wantCalls: []int{1}, wantReason: resilience.ReasonNotIdempotent,
		},
		{
			name: "gotry defaults, exporter retries on: the exporter repeats it", exporterRetries: true,
			steps:  []http.HandlerFunc{status(http.StatusServiceUnavailable), status(http.StatusTooManyRequests), exportOK},
			wantOK: true, wantCalls: []int{1, 1, 1}, wantReason: resilience.ReasonSuccess,
		},
		{
			name: "retrying transport, exporter retries off: gotry repeats it", retryPOSTs: true,
			steps: []http.HandlerFunc{
				status(http.StatusServiceUnavailable, "Retry-After", "1"),
				status(http.StatusTooManyRequests, "Retry-After", "2"),
				exportOK,
			},
			wantOK: true, wantCalls: []int{3}, wantReason: resilience.ReasonSuccess,
		},
		{
			name: "retrying transport, reset connection", retryPOSTs: true,
			steps:  []http.HandlerFunc{reset, exportOK},
			wantOK: true, wantCalls: []int{2}, wantReason: resilience.ReasonSuccess,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFailing(t, tc.steps...)
			fc := clock.NewFake(time.Now()) // from now: see TestPrometheusQueryIsRetried
			var calls ends
			tr := transport.New(newBase(t), transport.WithClock(fc),
				transport.WithNonIdempotentRetries(tc.retryPOSTs),
				transport.WithHooks(transport.Hooks{OnCallEnd: calls.add}))
			exp := newExporter(t, srv.URL, tr, tc.exporterRetries)
			stop := advancing(t, fc, 2*time.Second)
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			err := exp.ExportSpans(ctx, spans())
			if tc.wantOK != (err == nil) {
				t.Fatalf("ExportSpans: %v, want success %v", err, tc.wantOK)
			}
			got := calls.get()
			if len(got) == 0 {
				t.Fatal("no RoundTrip")
			}
			var attempts []int
			for _, c := range got {
				attempts = append(attempts, c.Attempts)
			}
			if len(attempts) != len(tc.wantCalls) || fmtInts(attempts) != fmtInts(tc.wantCalls) {
				t.Errorf("gotry attempts per RoundTrip %v, want %v", attempts, tc.wantCalls)
			}
			if r := got[len(got)-1].Reason; r != tc.wantReason {
				t.Errorf("last RoundTrip ended with %v, want %v", r, tc.wantReason)
			}
			want := 0
			for _, n := range tc.wantCalls {
				want += n
			}
			bodies := srv.received()
			if len(bodies) != want {
				t.Errorf("collector saw %d exports, want %d", len(bodies), want)
			}
			for i, b := range bodies {
				if b != bodies[0] || b == "" {
					t.Errorf("export %d sent %d bytes unlike the first's %d", i+1, len(b), len(bodies[0]))
				}
			}
		})
	}
}

func fmtInts(v []int) string {
	b := make([]byte, 0, 2*len(v))
	for _, n := range v {
		b = append(b, byte('0'+n), ',')
	}
	return string(b)
}

// TestOTLPExporterDoesNotTraceItsOwnExports: gotry's telemetry on the
// transport of a trace exporter that exports through the same tracer
// provider traces every export, and exports those spans in turn, for ever
// (each flush sends the previous export's spans). The documented wiring
// cannot loop: the exporter's transport gets a Telemetry of its own whose
// tracer provider records nothing (its metrics and logs are kept), so an
// idle application exports nothing after its own spans.
func TestOTLPExporterDoesNotTraceItsOwnExports(t *testing.T) {
	tests := []struct {
		name string
		// exporterTel builds the exporter's transport's telemetry from the
		// application's tracer provider.
		exporterTel func(app *sdktrace.TracerProvider) *telemetry.Telemetry
		wantExports int // after one application span and three flushes
	}{
		{"same provider: loops", func(app *sdktrace.TracerProvider) *telemetry.Telemetry {
			return telemetry.New(telemetry.WithTracerProvider(app), telemetry.WithMeterProvider(metricnoop.NewMeterProvider()))
		}, 3},
		{"a no-op tracer provider for the exporter's transport", func(*sdktrace.TracerProvider) *telemetry.Telemetry {
			return telemetry.New(telemetry.WithTracerProvider(tracenoop.NewTracerProvider()), telemetry.WithMeterProvider(metricnoop.NewMeterProvider()))
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFailing(t, exportOK)
			// The application's provider exports through the exporter; its
			// batcher never exports by itself within the test.
			var tr *transport.Transport
			exp := newExporter(t, srv.URL, roundTripperFunc(func(r *http.Request) (*http.Response, error) { return tr.RoundTrip(r) }), false)
			app := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
			t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
			tr = transport.New(newBase(t), tc.exporterTel(app).Transport())

			_, span := app.Tracer("app").Start(context.Background(), "app work")
			span.End()
			for range 3 {
				if err := app.ForceFlush(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if got := srv.count(); got != tc.wantExports {
				t.Errorf("collector saw %d exports after one span and three flushes, want %d", got, tc.wantExports)
			}
		})
	}
}

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
