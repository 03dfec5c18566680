package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/MrVSiK/gotry/telemetry/promexport"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME says
// otherwise; the upstream's spans use it with an "-upstream" suffix.
const DefaultServiceName = "gotry-demo"

// OTLPFromEnv reports whether the standard OpenTelemetry environment asks
// for OTLP export of traces and of metrics: an OTEL_EXPORTER_OTLP_ENDPOINT
// (or the signal's own _TRACES_/_METRICS_ endpoint) is set and
// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER is not "none". The exporters
// then read every other OTEL_EXPORTER_OTLP_* variable themselves.
func OTLPFromEnv(getenv func(string) string) (traces, metrics bool) {
	base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	traces = (base || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") && getenv("OTEL_TRACES_EXPORTER") != "none"
	metrics = (base || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "") && getenv("OTEL_METRICS_EXPORTER") != "none"
	return traces, metrics
}

// providers are the demo's OpenTelemetry pipelines: the client's and the
// upstream's tracer providers (both feed the span recorder, and OTLP when
// on) and one meter provider read by Prometheus (and OTLP when on): the
// public recipe, promexport.New, which also serves /metrics.
type providers struct {
	tp, upstreamTP *sdktrace.TracerProvider
	mp             *promexport.Provider
	serviceName    string
}

// newProviders builds the providers. OTLP exporters use the HTTP protocol
// and take endpoint, headers and timeouts from the environment.
func newProviders(ctx context.Context, cfg *Config, rec sdktrace.SpanProcessor) (*providers, error) {
	res, err := newResource(ctx, DefaultServiceName, "")
	if err != nil {
		return nil, err
	}
	name := DefaultServiceName
	if v, ok := res.Set().Value(semconv.ServiceNameKey); ok {
		name = v.AsString()
	}
	upRes, err := newResource(ctx, name+"-upstream", name+"-upstream")
	if err != nil {
		return nil, err
	}
	p := &providers{serviceName: name}

	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec)}
	upOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(upRes), sdktrace.WithSpanProcessor(rec)}
	if cfg.OTLPTraces {
		// One exporter per provider: each provider shuts its own down.
		for _, opts := range []*[]sdktrace.TracerProviderOption{&tpOpts, &upOpts} {
			exp, err := otlptracehttp.New(ctx)
			if err != nil {
				return nil, fmt.Errorf("demo: OTLP trace exporter: %w", err)
			}
			*opts = append(*opts, sdktrace.WithBatcher(exp))
		}
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if cfg.OTLPMetrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("demo: OTLP metric exporter: %w", err)
		}
		// The interval comes from OTEL_METRIC_EXPORT_INTERVAL (default 60s)
		// unless the demo sets one.
		var ro []sdkmetric.PeriodicReaderOption
		if cfg.MetricExportInterval > 0 {
			ro = append(ro, sdkmetric.WithInterval(cfg.MetricExportInterval))
		}
		mpOpts = append(mpOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, ro...)))
	}
	p.mp, err = promexport.New(nil, mpOpts...)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	p.tp = sdktrace.NewTracerProvider(tpOpts...)
	p.upstreamTP = sdktrace.NewTracerProvider(upOpts...)
	return p, nil
}

// newResource describes the process: service.name (OTEL_SERVICE_NAME wins
// unless force is set), a service.instance.id so two demos do not merge, and
// OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, name, force string) (*resource.Resource, error) {
	host, _ := os.Hostname()
	opts := []resource.Option{
		resource.WithAttributes(semconv.ServiceName(name),
			semconv.ServiceInstanceID(host+"/"+strconv.Itoa(os.Getpid()))),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	}
	if force != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(force)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("demo: resource: %w", err)
	}
	return res, nil
}

// shutdown flushes and stops every provider.
func (p *providers) shutdown(ctx context.Context) error {
	return errors.Join(p.tp.Shutdown(ctx), p.upstreamTP.Shutdown(ctx), p.mp.Shutdown(ctx))
}
