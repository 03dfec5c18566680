package telemetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/MrVSiK/gotry/transport"
)

// memRT answers 200 "ok" from memory, so the benchmarks measure the
// layers above it.
type memRT struct{}

func (memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: req}, nil
}

// BenchmarkRoundTrip compares, in one run: the bare base; otelhttp alone;
// gotry without hooks; gotry with full telemetry (every span sampled and
// recorded, metrics aggregated, zap at info writing JSON to io.Discard).
// The request succeeds at once, the common case. Each runs under two tracer
// providers: "sampled" records spans and drops them at End (no processor);
// "batcher" hands every ended span to a batch processor with a no-op
// exporter, as bench/candidates.go's peers run.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tpc := range []struct {
		name  string
		batch bool
	}{
		{"sampled", false},
		{"batcher", true},
	} {
		b.Run(tpc.name, func(b *testing.B) {
			for _, bc := range benchTransports(b, tpc.batch) {
				b.Run(bc.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						req, _ := http.NewRequest(http.MethodGet, "http://api.example:8080/items", nil)
						resp, err := bc.rt.RoundTrip(req)
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		})
	}
}

// benchTransport is a transport under comparison.
type benchTransport struct {
	name string
	rt   http.RoundTripper
}

// benchTransports returns the four transports BenchmarkRoundTrip and
// TestAllocationsWithTelemetry compare, with a tracer provider (always
// sampling; with a batch processor and a no-op exporter when batch) and a
// meter provider, both shut down at tb's cleanup.
func benchTransports(tb testing.TB, batch bool) []benchTransport {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sdktrace.AlwaysSample())}
	if batch {
		opts = append(opts, sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tb.Cleanup(func() {
		if err := mp.Shutdown(context.Background()); err != nil {
			tb.Error(err)
		}
		if err := tp.Shutdown(context.Background()); err != nil {
			tb.Error(err)
		}
	})
	prop := propagation.TraceContext{}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	tel := New(WithTracerProvider(tp), WithMeterProvider(mp), WithPropagators(prop), WithLogger(logger))
	return []benchTransport{
		{"bare", memRT{}},
		{"otelhttp", otelhttp.NewTransport(memRT{}, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp), otelhttp.WithPropagators(prop))},
		{"gotry", transport.New(memRT{})},
		{"gotry+telemetry", transport.New(memRT{}, tel.Transport())},
	}
}
