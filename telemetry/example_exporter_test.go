package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// spanPoster stands in for OpenTelemetry's OTLP/HTTP trace exporter: each
// export is one POST through client, as the real one sends through the
// client given with otlptracehttp.WithHTTPClient.
type spanPoster struct {
	client *http.Client
	url    string
}

func (p spanPoster) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, strings.NewReader(strconv.Itoa(len(spans))))
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (spanPoster) Shutdown(context.Context) error { return nil }

// gotry under the exporter of the tracer provider it records to: the
// exporter's transport gets a Telemetry of its own whose tracer provider
// records nothing (metrics and logs still flow), so exports are never
// traced, and never export spans of their own, which would loop: every
// export would make spans for the next one, 20 exports a second from an
// idle application. The application's own transports keep the provider.
// With the OTLP/HTTP exporter, the exporter's transport goes in its client:
//
//	exp, err := otlptracehttp.New(ctx,
//		otlptracehttp.WithHTTPClient(&http.Client{Transport: exporterTransport}))
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
	exp := spanPoster{client: &http.Client{Transport: exporterTransport}, url: collector.URL + "/v1/traces"}
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
