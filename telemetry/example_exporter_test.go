package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// gotry under the OTLP exporter of the tracer provider it records to: the
// exporter's transport gets a Telemetry of its own whose tracer provider
// records nothing (metrics and logs still flow), so exports are never
// traced, and never export spans of their own, which would loop: every
// export would make spans for the next one, 20 exports a second from an
// idle application. The application's own transports keep the provider.
func ExampleNew_otlpExporter() {
	var exports atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exports.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	quiet := telemetry.New(telemetry.WithTracerProvider(noop.NewTracerProvider()))
	exporterTransport := transport.New(base, quiet.Transport())
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(collector.URL+"/v1/traces"),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: exporterTransport}))
	if err != nil {
		fmt.Println(err)
		return
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	// The application's transports record to tp.
	app := &http.Client{Transport: transport.New(base,
		telemetry.New(telemetry.WithTracerProvider(tp)).Transport())}
	service := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer service.Close()

	resp, err := app.Get(service.URL) // traced: its spans go out with the first export
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	for range 3 { // then the application idles: nothing new to export
		_ = tp.ForceFlush(context.Background())
	}
	fmt.Println("exports:", exports.Load())
	// Output: exports: 1
}
