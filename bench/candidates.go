package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/gojek/heimdall/v7"
	"github.com/gojek/heimdall/v7/httpclient"
	"github.com/hashicorp/go-retryablehttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// candidate is one configuration under test: an http.RoundTripper built over
// the scenario's base.
type candidate struct {
	name string
	rt   http.RoundTripper
}

// retryConfig is what every retrying candidate is asked to do in a scenario,
// so they are compared like for like.
type retryConfig struct {
	attempts int           // attempts per request, the first included
	backoff  time.Duration // constant delay before each retry
}

// successRetry is the success-path configuration: gotry's default attempt
// count. The backoff never runs on the success path.
var successRetry = retryConfig{attempts: transport.DefaultMaxAttempts, backoff: 100 * time.Millisecond}

// otelKit is an OpenTelemetry SDK set up the way a production service has
// it, minus the network: every span sampled and batched to an exporter that
// drops it, metrics aggregated for a manual reader that is never read, W3C
// trace context injected, zap at info writing JSON to io.Discard.
type otelKit struct {
	tp   *sdktrace.TracerProvider
	mp   *sdkmetric.MeterProvider
	prop propagation.TextMapPropagator
	log  *zap.Logger
}

func newOtelKit() *otelKit {
	return &otelKit{
		tp: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(tracetest.NewNoopExporter())),
		mp:   sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		prop: propagation.TraceContext{},
		log: zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
			zapcore.AddSync(io.Discard), zapcore.InfoLevel)),
	}
}

func (k *otelKit) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Nothing is exported (a no-op span exporter, a manual metric reader):
	// a failed flush loses nothing the benchmark reports.
	_ = k.tp.Shutdown(ctx)
	_ = k.mp.Shutdown(ctx)
}

// gotryTelemetry is gotry with its telemetry package's hooks on kit.
func gotryTelemetry(base http.RoundTripper, k *otelKit, opts ...transport.Option) http.RoundTripper {
	tel := telemetry.New(telemetry.WithTracerProvider(k.tp), telemetry.WithMeterProvider(k.mp),
		telemetry.WithPropagators(k.prop), telemetry.WithLogger(k.log))
	return transport.New(base, append(opts, tel.Transport())...)
}

// gotryArmed has every protection armed on the success path: a breaker,
// hedging that never fires (1s) and a per-attempt timeout.
func gotryArmed(base http.RoundTripper) http.RoundTripper {
	return transport.New(base,
		transport.WithBreaker(resilience.BreakerConfig{}),
		transport.WithHedging(time.Second, 1),
		transport.WithPerAttemptTimeout(5*time.Second))
}

// gotryRetry is gotry with rc's attempts and a constant backoff; the budget
// stays at its default unless opts change it.
func gotryRetry(base http.RoundTripper, rc retryConfig, opts ...transport.Option) http.RoundTripper {
	return transport.New(base, append([]transport.Option{
		transport.WithMaxAttempts(rc.attempts),
		transport.WithBackoff(resilience.Constant(rc.backoff)),
	}, opts...)...)
}

// retryableHTTP is hashicorp/go-retryablehttp's RoundTripper with rc.
// Its design puts an *http.Client between it and the base; that layer is part
// of what it costs. The benchmarks drive it, like every candidate, through
// an outer *http.Client, which is exactly what its own StandardClient
// returns, so it pays the client twice as its users do. Logging is off.
func retryableHTTP(base http.RoundTripper, rc retryConfig) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	c.RetryMax = rc.attempts - 1
	c.RetryWaitMin, c.RetryWaitMax = rc.backoff, rc.backoff
	c.Backoff = func(lo, _ time.Duration, _ int, _ *http.Response) time.Duration { return lo }
	return &retryablehttp.RoundTripper{Client: c}
}

// failsafeRetry is failsafehttp with its HTTP retry policy set to rc, plus
// a hedge policy (max 1 hedge) when hedge > 0.
//
// failsafehttp v0.9.8 never closes the body of a response it retries, and
// when retries run out it returns an ExceededError holding the last response
// instead of the response: on HTTP/1.1 every failed attempt then strands a
// connection and two goroutines. The policy is therefore configured the way
// a careful user must: ReturnLastFailure, so the caller gets (and closes) the
// last response as with gotry, and a listener that drains and closes each
// response before it is retried. Neither runs on the success path.
func failsafeRetry(base http.RoundTripper, rc retryConfig, hedge time.Duration) http.RoundTripper {
	// bodyclose mistakes policies over *http.Response for requests made here;
	// the responses are closed by the listener below and by the caller.
	//nolint:bodyclose // no response is obtained here, see above
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(rc.attempts).WithDelay(rc.backoff).
		ReturnLastFailure().
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) { finish(e.LastResult()) }).
		Build()
	policies := []failsafe.Policy[*http.Response]{rp}
	if hedge > 0 {
		policies = append(policies, hedgepolicy.NewBuilderWithDelay[*http.Response](hedge).WithMaxHedges(1).Build()) //nolint:bodyclose // no response is obtained here, see above
	}
	return failsafehttp.NewRoundTripper(base, policies...)
}

// heimdallRT adapts heimdall's client, which is a Doer and not a
// RoundTripper, so every candidate is driven the same way: through an outer
// *http.Client. Its own Doer calls the base's RoundTrip directly, so the
// request still passes one *http.Client, as in heimdall's normal use
// (heimdall's Do over an *http.Client over the base); only the client's
// place, outside heimdall instead of inside, differs.
type heimdallRT struct{ c *httpclient.Client }

func (h heimdallRT) RoundTrip(r *http.Request) (*http.Response, error) { return h.c.Do(r) }

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func heimdallRetry(base http.RoundTripper, rc retryConfig) http.RoundTripper {
	return heimdallRT{httpclient.NewClient(
		httpclient.WithHTTPClient(doerFunc(base.RoundTrip)),
		httpclient.WithRetryCount(rc.attempts-1),
		httpclient.WithRetrier(heimdall.NewRetrier(heimdall.NewConstantBackoff(rc.backoff, 0))),
	)}
}

// otelHTTP is otelhttp alone on kit's providers.
func otelHTTP(base http.RoundTripper, k *otelKit) http.RoundTripper {
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(k.tp),
		otelhttp.WithMeterProvider(k.mp), otelhttp.WithPropagators(k.prop))
}

// overheadCandidates are the success-path configurations, bare first.
func overheadCandidates(base http.RoundTripper, k *otelKit) []candidate {
	return []candidate{
		{"bare", base},
		{"gotry defaults", transport.New(base)},
		{"gotry breaker+hedge(1s)+timeout", gotryArmed(base)},
		{"gotry + telemetry", gotryTelemetry(base, k)},
		{"go-retryablehttp", retryableHTTP(base, successRetry)},
		{"failsafe-go retry", failsafeRetry(base, successRetry, 0)},
		{"failsafe-go retry+hedge(1s)", failsafeRetry(base, successRetry, time.Second)},
		{"heimdall retries", heimdallRetry(base, successRetry)},
		{"otelhttp", otelHTTP(base, k)},
	}
}

// isCircuitOpen reports a request refused by gotry's breaker.
func isCircuitOpen(err error) bool { return errors.Is(err, transport.ErrCircuitOpen) }
