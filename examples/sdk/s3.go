package sdk

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// S3Transport is the transport this package recommends under the AWS SDK
// for Go v2: the SDK's retryer keeps retrying (it knows S3's error codes,
// retries POSTs S3 allows, replays multi-MiB part bodies from their
// seekable readers, and shares one retry quota across the client), and
// gotry sends each of the SDK's attempts once. What gotry adds underneath:
//
//   - a circuit breaker per host, so in an outage the SDK's attempts fail at
//     once, locally, instead of reaching a host that is shedding load;
//   - a concurrency limit per host, learned from latency and 503 SlowDown;
//   - telemetry of every physical attempt (pass telemetry's option in
//     opts), which the SDK's own metrics report only per operation.
//
// opts come after these, so they may add telemetry, hooks or a different
// breaker. base is the HTTP transport the SDK would have used (see
// SDKTransport for the one that keeps AWS_CA_BUNDLE).
func S3Transport(base http.RoundTripper, opts ...transport.Option) *transport.Transport {
	return transport.New(base, append([]transport.Option{
		transport.WithMaxAttempts(1), // the SDK's retryer is the one retrying layer
		transport.WithBreaker(resilience.BreakerConfig{}),
		transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}),
	}, opts...)...)
}

// S3Retryer is the SDK's standard retryer, told that gotry's own refusals
// (an open breaker, a shed request) are final. The SDK retries every error
// an HTTP client returns as a connection error; retrying a refusal only
// spends its backoff and its retry quota on attempts gotry refuses again
// without sending. opts are the retryer's options, applied first.
func S3Retryer(opts ...func(*retry.StandardOptions)) aws.Retryer {
	// A full slice expression, so the append never writes into the caller's array.
	return retry.NewStandard(append(opts[:len(opts):len(opts)], func(o *retry.StandardOptions) {
		o.Retryables = append([]retry.IsErrorRetryable{RefusedByGotry}, o.Retryables...)
	})...)
}

// RefusedByGotry tells an AWS SDK retryer that an error from gotry's
// breaker or concurrency limit is not retryable, and has no opinion on any
// other error. Nothing was sent for such an error.
var RefusedByGotry = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	if errors.Is(err, resilience.ErrCircuitOpen) || errors.Is(err, resilience.ErrOverloaded) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
})

// ReadPolicy is a gotry policy for idempotent reads (GetObject,
// HeadObject) under the SDK's retryer, set on the operation's context with
// transport.WithPolicy: when no answer has come after hedgeDelay (near the
// reads' p95 latency), gotry sends one hedge, a second copy of the request,
// and uses whichever answers first; and each attempt gets
// perAttemptTimeout, if positive. Writes should not carry a per-attempt
// timeout: it counts their upload time. The two attempts a hedge needs also
// let gotry retry a failed read once (within its retry budget), so one SDK
// attempt is at most two requests; the breaker still counts every failure.
func ReadPolicy(hedgeDelay, perAttemptTimeout time.Duration) transport.Policy {
	return transport.Policy{
		MaxAttempts:       2,
		MaxHedges:         1,
		HedgeDelay:        hedgeDelay,
		PerAttemptTimeout: perAttemptTimeout,
	}
}

// SDKTransport returns a copy of the *http.Transport the SDK built for cfg
// (config.LoadDefaultConfig's, with the roots of AWS_CA_BUNDLE or
// config.WithCustomCABundle, and the SDK's dial and TLS settings), to be
// gotry's base. Load the config without config.WithHTTPClient, then set
// cfg.HTTPClient to a client over gotry on this base: with a CA bundle
// configured, LoadDefaultConfig fails on any HTTP client but its own
// ("unable to add custom RootCAs HTTPClient, has no WithTransportOptions").
// It fails when cfg.HTTPClient is not the SDK's own client.
func SDKTransport(cfg aws.Config) (*http.Transport, error) {
	own, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		return nil, fmt.Errorf("sdk: cfg.HTTPClient is a %T, not the SDK's *http.BuildableClient", cfg.HTTPClient)
	}
	return own.GetTransport(), nil
}
