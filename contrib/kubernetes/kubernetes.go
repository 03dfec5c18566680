package kubernetes

import (
	"net/http"
	"syscall"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Wrap returns a rest.Config.WrapTransport function that puts gotry under
// client-go in the set-up this package recommends. client-go retries by
// itself: any verb, POST included, on a 429 or 5xx answer that carries
// Retry-After (up to 10 times, each retry through its QPS limiter), and a
// GET whose connection was reset; its typed clients cannot turn that off.
// So client-go is the retrying layer and gotry sends each of its requests
// once, adding underneath:
//
//   - a circuit breaker per API server, so in an outage client-go's
//     retries fail at once, locally (client-go does not retry gotry's
//     refusal), instead of ten times per call;
//   - a concurrency limit per API server, learned from latency and 503s;
//   - telemetry of every physical attempt (pass telemetry's option in
//     opts).
//
// Throttles do not count against the breaker: a 429, or a 503 whose
// Retry-After asks for a wait, is the API server asking this client to
// slow down (priority and fairness), which client-go does, waiting the
// Retry-After; it is not a sign the server is down. Classifier keeps gotry
// from retrying a 429 when a request's Policy allows it more attempts.
//
// The returned transport, a *Transport, makes one adaptation client-go
// needs over HTTP/2 (see Transport.RoundTrip): a GET whose stream the
// server reset is reported to client-go as the connection reset it is the
// HTTP/2 form of, so client-go resends it as it resends a GET over a reset
// HTTP/1.1 connection.
//
// opts come after these settings, so they may add telemetry or hooks. Each
// call of the returned function (one per client built from the config)
// makes its own transport, with its own breakers: build one clientset and
// share it.
func Wrap(opts ...transport.Option) func(http.RoundTripper) http.RoundTripper {
	return func(base http.RoundTripper) http.RoundTripper {
		return &Transport{Transport: transport.New(base, append([]transport.Option{
			transport.WithMaxAttempts(1), // client-go retries what the server asks it to
			transport.WithClassifier(Classifier),
			transport.WithBreaker(resilience.BreakerConfig{}),
			transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}),
		}, opts...)...)}
	}
}

// Transport is the transport Wrap puts under client-go: gotry's, whose
// Stats and Settings it has, with one change to what RoundTrip returns.
type Transport struct {
	*transport.Transport
}

// RoundTrip sends req through gotry. When a GET fails because the server
// reset its HTTP/2 stream (transport.ClassStreamReset) or refused it
// (ClassStreamRefused; net/http's own resends of it ran out), the error
// returned also matches syscall.ECONNRESET (a *StreamResetError), and
// client-go resends the GET, after a second and through its QPS limiter,
// as it does a GET whose connection was reset (rest.Request's retry of
// "connection reset" errors, GETs only). Over HTTP/2 one request's
// failure resets its stream where HTTP/1.1 closes its connection (Go's
// server does so when a handler panics); client-go recognises only the
// latter. gotry still makes one attempt per request, and its breaker
// counts each reset as a failure, so a server that resets every stream
// opens it and client-go stops at gotry's refusal. A request of any other
// method is left as it is: client-go resends none after a reset, and gotry
// sends them once (a create whose stream was reset may have taken
// effect).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Transport.RoundTrip(req)
	if err == nil || (req.Method != http.MethodGet && req.Method != "") {
		return resp, err
	}
	switch transport.ClassifyError(err) {
	case transport.ClassStreamReset, transport.ClassStreamRefused:
		return nil, &StreamResetError{Err: err}
	}
	return nil, err
}

// StreamResetError is the error Transport returns for a GET whose HTTP/2
// stream the server reset or refused: Err, which it reads as, and
// syscall.ECONNRESET, both in its chain (errors.Is and errors.As find
// either), so client-go takes it for the connection reset it retries.
type StreamResetError struct {
	Err error // gotry's error: the stream's reset, as the HTTP/2 client reported it
}

// Error returns Err's text.
func (e *StreamResetError) Error() string { return e.Err.Error() }

// Unwrap returns Err and syscall.ECONNRESET.
func (e *StreamResetError) Unwrap() []error { return []error{e.Err, syscall.ECONNRESET} }

// Classifier marks a 429 answer final for gotry, so gotry does not retry
// it when a request's Policy allows more attempts; client-go waits the
// Retry-After and sends again. (Like every throttle, a 429 does not count
// against gotry's breaker, neither as a failure nor as a success.) Every
// other result gets gotry's default rules.
func Classifier(a transport.Attempt) transport.Decision {
	if a.Response != nil && a.Response.StatusCode == http.StatusTooManyRequests {
		return transport.DontRetry
	}
	return transport.Default
}
