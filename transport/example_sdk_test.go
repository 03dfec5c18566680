package transport_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// An SDK that retries by itself, here an OpenTelemetry OTLP/HTTP exporter,
// gets a transport of its own, and one of the two layers retries, never
// both: their attempts would multiply (gotry's retry budget bounds only
// gotry's own retries; each of the SDK's is a new request to gotry).
//
// An export is a POST without an Idempotency-Key, which gotry sends once
// by default: the exporter's own retries (on 429, 502, 503 and 504) are
// then the only ones, and gotry adds its breaker and telemetry. Here gotry
// retries instead, with its backoff, Retry-After, per-attempt timeout and
// budget: WithNonIdempotentRetries on the exporter's transport (OTLP lets a
// client send an export again; a repeat after a connection lost mid-request
// may duplicate spans), and the exporter's retries off:
//
//	exp, err := otlptracehttp.New(ctx,
//		otlptracehttp.WithHTTPClient(&http.Client{Transport: tr}),
//		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
//
// With gotry's telemetry on this transport, give it a Telemetry whose
// tracer provider records nothing, or the exporter traces its own exports
// for ever: telemetry.New(telemetry.WithTracerProvider(noop.NewTracerProvider())).
func Example_otlpExporter() {
	var arrivals atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if arrivals.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable) // briefly unavailable
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	tr := transport.New(base,
		transport.WithNonIdempotentRetries(true), // this transport carries only exports
		transport.WithMaxAttempts(4),
		transport.WithPerAttemptTimeout(10*time.Second),
		transport.WithBackoff(resilience.Constant(time.Millisecond)), // short for the example
	)

	// What the exporter does for each export: one POST with a body it can
	// replay (http.NewRequest sets GetBody for a bytes.Reader).
	export := []byte("an ExportTraceServiceRequest")
	req, err := http.NewRequest(http.MethodPost, collector.URL+"/v1/traces", bytes.NewReader(export))
	if err != nil {
		fmt.Println(err)
		return
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", arrivals.Load(), "arrivals")
	// Output: 200 after 2 arrivals
}
