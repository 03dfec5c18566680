package awssdk

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
//     once, locally, instead of reaching a host that is shedding load (a
//     SlowDown is a throttle, not an outage: see S3Classifier);
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
		transport.WithClassifier(S3Classifier),
		transport.WithBreaker(resilience.BreakerConfig{}),
		transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}),
	}, opts...)...)
}

// S3Retryer is the SDK's standard retryer with two changes. gotry's own
// refusals (an open breaker, a shed request) are final: the SDK retries
// every error an HTTP client returns as a connection error, and retrying a
// refusal only spends its backoff and its retry quota on attempts gotry
// refuses again without sending. And a throttle (S3's 503 SlowDown, any
// error the retryer's Throttles recognise) is waited out for at least half
// the SDK's own throttle backoff: after the n-th attempt met one, the
// retry waits a random delay in [d/2, d), where d = 1s × 2^(n−1), at most
// MaxBackoff, is the ceiling the SDK's own backoff draws from in [0, d).
// Other errors keep the SDK's backoff (50 ms × 2^(n−1), full jitter).
//
// The floor is what keeps a brief throttle from failing writes. With full
// jitter a retry can land at once, inside the throttle that failed it:
// eight writers meeting 600 ms of SlowDown lost about one write in eleven
// (TestS3ThrottleBurstKeepsEveryWrite with the SDK's own backoff: 11 of
// 120 writes in fifteen runs failed, their three attempts all inside the
// burst). With the floor the third of the SDK's three attempts comes at
// least 0.5 s + 1 s after the first failed, so any throttle shorter than
// 1.5 s is outlasted whatever the jitter draws, and the jitter still
// spreads the writers over half of each window. It costs a quarter of the
// ceiling more waiting on average (0.75 s before the first retry instead
// of 0.5 s), spent where the server asked for less.
//
// opts are the retryer's options, applied first; one that sets Backoff
// keeps its own.
func S3Retryer(opts ...func(*retry.StandardOptions)) aws.Retryer {
	// A full slice expression, so the append never writes into the caller's array.
	return retry.NewStandard(append(opts[:len(opts):len(opts)], func(o *retry.StandardOptions) {
		o.Retryables = append([]retry.IsErrorRetryable{RefusedByGotry}, o.Retryables...)
		if o.Backoff == nil {
			o.Backoff = newThrottleBackoff(*o)
		}
	})...)
}

// throttleBackoff is S3Retryer's backoff: the SDK's, with a floor for
// throttles.
type throttleBackoff struct {
	std       *retry.Standard // the SDK's own backoff, for errors that are no throttle
	throttles retry.IsErrorThrottle
	max       time.Duration // StandardOptions.MaxBackoff; 0 for none
}

// newThrottleBackoff returns the backoff for o's MaxBackoff, BaseDelay and
// Throttles. The SDK's own backoff for o is the RetryDelay of a standard
// retryer built from o: its constructor is not exported.
func newThrottleBackoff(o retry.StandardOptions) *throttleBackoff {
	o.Backoff = nil
	std := retry.NewStandard(func(so *retry.StandardOptions) { *so = o })
	return &throttleBackoff{std: std, throttles: retry.IsErrorThrottles(o.Throttles), max: o.MaxBackoff}
}

// throttleBase is the SDK's throttle backoff base: the first retry after a
// throttle waits up to this (aws/retry, "retries 2026").
const throttleBase = time.Second

// BackoffDelay returns the delay before the retry that follows attempt's
// err: see S3Retryer.
func (b *throttleBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	if b.throttles.IsErrorThrottle(err) != aws.TrueTernary {
		return b.std.RetryDelay(attempt, err)
	}
	d := throttleBase
	for i := 1; i < attempt && d < b.max; i++ {
		d *= 2
	}
	if b.max > 0 {
		d = min(d, b.max)
	}
	return d/2 + rand.N(d-d/2), nil // d ≥ 1ns, so the range is never empty
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
		return nil, fmt.Errorf("awssdk: cfg.HTTPClient is a %T, not the SDK's *http.BuildableClient", cfg.HTTPClient)
	}
	return own.GetTransport(), nil
}

// S3Classifier tells gotry what S3's 5xx answers mean, for its breaker
// and its concurrency limit (the SDK's retryer decides the retries; at one
// attempt gotry retries nothing):
//
//   - 503 is a throttle (transport.Throttled): the breaker does not count
//     it, the limit does, as the congestion it is. S3 answers 503 with two
//     error codes, SlowDown and ServiceUnavailable, and documents both as
//     "reduce your request rate"; it sends neither with Retry-After, which
//     is how gotry's own rules tell a throttle from a backend that is
//     down. The code is in the XML body, which a classifier must not
//     read, and there is nothing to tell apart: every S3 503 asks for
//     less. (A proxy in front of S3 answering 503 for an S3 it cannot
//     reach would be taken for a throttle too; an unreachable endpoint
//     more often shows as refused or timed-out connections, which count.)
//   - 500 is a failure (transport.Retry): S3's InternalError, which it asks
//     clients to retry and the SDK does. gotry's default rules take a 500
//     for a final answer, which its breaker counts as a success, so an S3
//     answering nothing but 500s never opened it. (A read under
//     ReadPolicy, with two attempts, may now be retried once by gotry
//     after a 500, within its retry budget, as after a 503.)
//
// Every other result gets gotry's default rules.
func S3Classifier(a transport.Attempt) transport.Decision {
	if a.Response == nil {
		return transport.Default
	}
	switch a.Response.StatusCode {
	case http.StatusServiceUnavailable:
		return transport.Throttled
	case http.StatusInternalServerError:
		return transport.Retry
	}
	return transport.Default
}
