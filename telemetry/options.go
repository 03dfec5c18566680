package telemetry

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/MrVSiK/gotry/clock"
)

// DefaultGiveUpLogInterval is how often, at most, a give-up line is written
// for one host and reason (see WithGiveUpLogInterval).
const DefaultGiveUpLogInterval = time.Second

// DefaultHostLimit is how many distinct server.address values the metrics
// carry before new hosts are reported as OtherHost.
const DefaultHostLimit = 100

// Option configures a Telemetry. Options are applied in order after the
// defaults; a nil Option, and an option given a nil value, change nothing.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what New builds a Telemetry from; options write it once.
type config struct {
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	propagators propagation.TextMapPropagator
	zap         *zap.Logger
	slog        *slog.Logger
	hostLimit   int
	hostLabel   func(string) string
	dropQuery   bool          // url.full without its query
	giveUpEvery time.Duration // at most one give-up line per host and reason per period; 0: every line
	clock       clock.Clock   // the clock of attempt spans and the log rate limiters; tests inject one
}

// defaultConfig reads the otel globals. The global providers delegate to
// whatever is installed later, so New may run before otel.SetTracerProvider.
func defaultConfig() config {
	return config{
		tp:          otel.GetTracerProvider(),
		mp:          otel.GetMeterProvider(),
		propagators: otel.GetTextMapPropagator(),
		hostLimit:   DefaultHostLimit,
		giveUpEvery: DefaultGiveUpLogInterval,
		clock:       clock.Real(),
	}
}

// WithTracerProvider sets where spans go (default otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	})
}

// WithMeterProvider sets where metrics go (default otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	})
}

// WithPropagators sets how each attempt's span context is written into its
// request headers (default otel.GetTextMapPropagator(), which is a no-op
// until the application installs one, e.g. propagation.TraceContext{}).
func WithPropagators(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *config) {
		if p != nil {
			c.propagators = p
		}
	})
}

// WithLogger logs retries, give-ups, breaker changes and budget exhaustion
// to l (default: no logging). It may be combined with WithSlogLogger; both
// then receive every line.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.zap = l
		}
	})
}

// WithSlogLogger logs the same lines with the same fields as WithLogger to a
// standard library logger (default: no logging).
func WithSlogLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.slog = l
		}
	})
}

// WithHostLimit bounds the distinct server.address values that metrics carry
// (default DefaultHostLimit). Once n hosts have been seen, every new one is
// reported as OtherHost without a server.port, so a client that talks to
// unbounded hosts cannot explode the metric cardinality. n <= 0 removes the
// bound. Spans and logs always carry the real host.
func WithHostLimit(n int) Option {
	return optionFunc(func(c *config) { c.hostLimit = n })
}

// WithHostLabel maps each host to the server.address value its metrics carry
// (default: the host itself), e.g. to fold "eu-1.api.example.com" and
// "us-2.api.example.com" into "api.example.com". It runs before the host
// limit, which then counts labels. It must be safe for concurrent use.
func WithHostLabel(f func(host string) string) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.hostLabel = f
		}
	})
}

// WithGiveUpLogInterval aggregates give-up lines (MsgGaveUp): per transport
// (or retrier) and per (server address and port, or operation; reason), the first
// line is always written, then at most one per d, carrying gotry.suppressed,
// the count of like lines dropped since the one before (default
// DefaultGiveUpLogInterval; d <= 0 writes every line). An outage that fails
// 200 requests fast then writes a few lines, not 200; the metrics still
// count every give-up. Lines dropped after the last one written are not
// reported until the next is.
func WithGiveUpLogInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.giveUpEvery = max(d, 0) })
}

// WithoutURLQuery drops the query from url.full entirely. By default the
// query is kept, with the values of the parameters the HTTP conventions list
// as sensitive (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token,
// sig, X-Goog-Signature, and the older AWSAccessKeyId and Signature)
// replaced by "REDACTED"; use this option when your queries carry other
// secrets.
func WithoutURLQuery() Option {
	return optionFunc(func(c *config) { c.dropQuery = true })
}

// WithClock sets the clock that stamps attempt spans' start and end times
// and drives the log rate limiters (default the wall clock; nil is
// ignored). Give it the transport's clock: with a clock set, request spans
// carry the transport's times too; with the default, the SDK reads the
// wall clock for them, as the transport does. Backoff spans always carry
// the transport's times. A test passes the clock.Fake it gives the
// transport.
func WithClock(cl clock.Clock) Option {
	return optionFunc(func(c *config) {
		if cl != nil {
			c.clock = cl
		}
	})
}
