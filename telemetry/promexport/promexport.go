// Package promexport serves gotry's metrics to Prometheus, for a program
// that has no OpenTelemetry of its own. New returns an OpenTelemetry
// MeterProvider (the SDK's) whose reader is the OpenTelemetry Prometheus
// exporter, and an http.Handler that serves what it measured at each
// scrape. Give it to telemetry.New as the meter provider, wire transports
// as usual, and serve it at /metrics:
//
//	prom, err := promexport.New(nil)
//	if err != nil { ... }
//	tel := telemetry.New(telemetry.WithMeterProvider(prom))
//	client := &http.Client{Transport: transport.New(nil, tel.Transport())}
//	http.Handle("/metrics", prom)
//
// The metric names are telemetry's METRICS.md's Prometheus names
// (gotry_attempts_total, gotry_request_duration_seconds, ...).
//
// It is a module of its own, github.com/MrVSiK/gotry/telemetry/promexport,
// released with telemetry under the same version: the Prometheus client and
// the OpenTelemetry Prometheus exporter (and the protobuf module they
// require) are on the build list of programs that import this package, not
// of every program that imports telemetry.
package promexport

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Provider is a MeterProvider whose metrics Prometheus scrapes from its
// ServeHTTP. The handler answers in the OpenMetrics format when the scraper
// asks for it, the format that carries the latency histograms' exemplars,
// and in Prometheus's text format otherwise. It measures nothing between
// scrapes beyond what the instruments record, and starts no goroutine
// unless an option given to New adds a periodic reader; Shutdown (of the
// embedded MeterProvider) stops those. Safe for concurrent use.
type Provider struct {
	*sdkmetric.MeterProvider
	handler http.Handler
}

// New returns a Provider whose metrics are registered with reg. With reg
// nil they go to a registry of its own, which ServeHTTP serves. To add them
// to a registry the program already serves (the default one of
// promhttp.Handler(): prometheus.DefaultRegisterer), pass it: ServeHTTP
// then serves that registry too when it is a prometheus.Gatherer (a
// *prometheus.Registry is), and answers 500 when it is not (serve it as you
// do already).
//
// opts configure the MeterProvider after the exporter's reader is added: a
// resource (sdkmetric.WithResource), views, or another reader, such as a
// periodic OTLP reader, to export the same metrics elsewhere too. It fails
// only when reg refuses the exporter's collector. Call it once per
// registry: the collector cannot describe its metrics in advance, so a
// registry does not refuse a second one, and its scrapes then fail on
// series collected twice.
func New(reg prometheus.Registerer, opts ...sdkmetric.Option) (*Provider, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if exp == nil {
		return nil, fmt.Errorf("promexport: Prometheus exporter: %w", err)
	}
	if err != nil {
		// The exporter works, without the instruments it measures itself
		// with: reported as telemetry.New reports instruments it cannot
		// create.
		otel.Handle(err)
	}
	p := &Provider{
		MeterProvider: sdkmetric.NewMeterProvider(append([]sdkmetric.Option{sdkmetric.WithReader(exp)}, opts...)...),
		handler:       notGathered{},
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		// OpenMetrics when asked for: the format that carries exemplars.
		p.handler = promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
	}
	return p, nil
}

// ServeHTTP serves the registry's metrics (see New).
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// notGathered answers for a registry New cannot read.
type notGathered struct{}

func (notGathered) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "promexport: the Registerer given to New is not a prometheus.Gatherer: serve it yourself",
		http.StatusInternalServerError)
}
