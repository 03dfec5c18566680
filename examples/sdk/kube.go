package sdk

import (
	"net/http"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// KubernetesWrap returns a rest.Config.WrapTransport function that puts
// gotry under client-go in the set-up this package recommends. client-go
// retries by itself: any verb, POST included, on a 429 or 5xx answer that
// carries Retry-After (up to 10 times, each retry through its QPS
// limiter), and a GET whose connection was reset; its typed clients cannot
// turn that off. So client-go is the retrying layer and gotry sends each
// of its requests once, adding underneath:
//
//   - a circuit breaker per API server, so in an outage client-go's
//     retries fail at once, locally (client-go does not retry gotry's
//     refusal), instead of ten times per call;
//   - a concurrency limit per API server, learned from latency and 503s;
//   - telemetry of every physical attempt (pass telemetry's option in
//     opts).
//
// 429 answers do not count against the breaker (KubernetesClassifier):
// they are the API server's priority and fairness asking one client to
// slow down, which client-go does, not a sign the server is down. opts come after
// these settings, so they may add telemetry or hooks. Each call of the
// returned function (one per client built from the config) makes its own
// transport, with its own breakers: build one clientset and share it.
func KubernetesWrap(opts ...transport.Option) func(http.RoundTripper) http.RoundTripper {
	return func(base http.RoundTripper) http.RoundTripper {
		return transport.New(base, append([]transport.Option{
			transport.WithMaxAttempts(1), // client-go retries what the server asks it to
			transport.WithClassifier(KubernetesClassifier),
			transport.WithBreaker(resilience.BreakerConfig{}),
			transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}),
		}, opts...)...)
	}
}

// KubernetesClassifier marks a 429 answer final for gotry, so gotry does
// not retry it and its breaker counts it as an answer, not a failure;
// client-go waits the Retry-After and sends again. Every other result gets
// gotry's default rules.
func KubernetesClassifier(a transport.Attempt) transport.Decision {
	if a.Response != nil && a.Response.StatusCode == http.StatusTooManyRequests {
		return transport.DontRetry
	}
	return transport.Default
}
