package promexport_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/telemetry/promexport"
	"github.com/MrVSiK/gotry/transport"
)

// Prometheus without OpenTelemetry in the program: New makes the meter
// provider and serves what it measures. In a service the handler
// goes on the mux (http.Handle("/metrics", prom)); here a test server
// stands in for it, and for the downstream, which answers 503 once.
func ExampleNew() {
	var calls atomic.Int32
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer downstream.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	prom, err := promexport.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = prom.Shutdown(context.Background()) }()
	tel := telemetry.New(telemetry.WithMeterProvider(prom))
	client := &http.Client{Transport: transport.New(base, tel.Transport(telemetry.Name("inventory")),
		transport.WithBackoff(resilience.Constant(0)))}
	metrics := httptest.NewServer(prom)
	defer metrics.Close()

	resp, err := client.Get(downstream.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	// What Prometheus scrapes.
	resp, err = (&http.Client{Transport: base}).Get(metrics.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "# TYPE gotry_attempts_total "),
			strings.HasPrefix(line, "# TYPE gotry_request_duration_seconds "):
			fmt.Println(line)
		case strings.HasPrefix(line, "gotry_retries_total{"):
			fmt.Println("gotry_retries_total", line[strings.LastIndexByte(line, ' ')+1:])
		}
	}
	// Output:
	// # TYPE gotry_attempts_total counter
	// # TYPE gotry_request_duration_seconds histogram
	// gotry_retries_total 1
}
