package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.uber.org/zap"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// flakyServer answers 503 once, then 200.
func flakyServer() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
}

// The setup: one Telemetry per process, one option per transport. Spans
// and metrics go to the otel globals, logs to zap; the transport's budget
// and breaker gauges are reported as long as it is in use.
func Example() {
	srv := flakyServer()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	tel := telemetry.New(telemetry.WithLogger(zap.NewNop()))
	tr := transport.New(base, tel.Transport(telemetry.Name("payments")),
		transport.WithBackoff(resilience.Constant(time.Millisecond)))

	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close() // ends the winning attempt's span
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 ok
}

// The same Telemetry serves the generic Retrier: the operation name
// (Retry's key) replaces the HTTP attributes.
func ExampleTelemetry_Retrier() {
	tel := telemetry.New(telemetry.WithSlogLogger(slog.New(slog.DiscardHandler)))
	r := resilience.NewRetrier(tel.Retrier(telemetry.Name("config")),
		resilience.WithBackoff(resilience.Constant(time.Millisecond)))
	calls := 0
	v, err := resilience.Retry(context.Background(), r, "load-config", func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", errors.New("flaky")
		}
		return "config", nil
	})
	fmt.Println(v, err, calls)
	// Output: config <nil> 2
}

// gotry → otelhttp → base: otelhttp makes the one CLIENT span per attempt
// (Transport sees it in the base, so gotry makes none), and the annotator
// inside it copies gotry's attempt attributes onto it.
func ExampleTelemetry_AttemptAnnotator() {
	srv := flakyServer()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	tel := telemetry.New()
	tr := transport.New(otelhttp.NewTransport(tel.AttemptAnnotator(base)), tel.Transport(),
		transport.WithBackoff(resilience.Constant(time.Millisecond)))

	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}
