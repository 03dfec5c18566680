// Package kubernetes puts gotry under Kubernetes client-go, which retries
// by itself, in a set-up its tests hold against an API server on loopback
// speaking Kubernetes JSON (config maps: create, get, list, watch), over
// HTTP/1.1 and over HTTP/2 with TLS, with injected faults: 429 and 503
// with and without Retry-After, reset connections and reset streams. Wrap
// is the entry point: a function for rest.Config.Wrap.
//
// It is a module of its own, github.com/MrVSiK/gotry/contrib/kubernetes.
// The package imports only gotry and the standard library; its tests and
// ExampleWrap require client-go, k8s.io/api and k8s.io/apimachinery, which
// therefore appear on its users' build lists (go list -m all), at least at
// the versions its go.mod requires. Run the tests with make sdk-test.
//
// The package's name is also that of client-go's clientset package,
// k8s.io/client-go/kubernetes: a file that imports both names one of them,
// e.g. gotrykube "github.com/MrVSiK/gotry/contrib/kubernetes".
//
// # Which layer retries
//
// When both client-go and gotry retry, every request client-go sends is a
// new request to gotry and the attempts multiply; gotry's retry budget
// bounds only gotry's share. client-go resends a request, whatever its
// verb (a create's POST included), when the answer is a 429 or any 5xx
// carrying Retry-After, up to 10 times, waiting the Retry-After; and a GET
// whose connection was reset or ended early. A typed client cannot turn
// that off (rest.Request.MaxRetries is not reachable through it). The API
// server answers 429 from priority and fairness before it acts, so those
// resends are safe; client-go is the retrying layer, and gotry sends each
// of its requests once (transport.WithMaxAttempts(1)), adding what
// client-go does not have: a circuit breaker and a concurrency limit per
// API server, and telemetry of every physical attempt. (A 5xx with
// Retry-After may come after the server acted, from a request that timed
// out but still completes; client-go's resend of a create then fails with
// 409 AlreadyExists. That is client-go's behaviour, the same with or
// without gotry.)
//
// # The set-up
//
// cfg.Wrap(kubernetes.Wrap(opts...)) (see ExampleWrap), which is gotry
// with WithMaxAttempts(1), WithBreaker, WithConcurrencyLimit and
// Classifier (a 429 is final for gotry), and opts after them: telemetry's
// option (telemetry.New().Transport(), package
// github.com/MrVSiK/gotry/telemetry), hooks. A 429, and a 503 whose
// Retry-After asks for a wait, are throttles, which gotry's breaker does
// not count: they ask this client to slow down, which client-go does; they
// do not mean the server is down. client-go does not retry gotry's
// refusals, so an open breaker fails calls at once.
//
// Over HTTP/2 (what an API server speaks over TLS) a server that fails one
// request resets its stream where over HTTP/1.1 it closes the connection.
// client-go resends a GET whose connection was reset, not one whose stream
// was, and gotry at one attempt sends it once: the GET failed. The
// transport Wrap returns (a *Transport) reports a GET's reset or refused
// stream to client-go as a connection reset too (the error, a
// *StreamResetError, also matches syscall.ECONNRESET), so client-go
// resends it, a second later and through its QPS limiter, as it does over
// HTTP/1.1. The retrying layer stays client-go, whose resends the QPS
// limit bounds; gotry still sends each request once and counts each reset
// against its breaker, which client-go does not resend past. (The other
// way, letting gotry retry a reset stream at one configured attempt, would
// have changed what MaxAttempts means for every user, and its retries
// would bypass the QPS limiter.) A create, or any other verb, whose stream was
// reset is sent once: it may have taken effect.
//
// rest.Config.WrapTransport (and rest.Config.Wrap) put gotry directly over
// client-go's HTTP transport, under its authentication and user-agent
// wrappers and under its QPS limiter: client-go's own retries wait for the
// limiter, gotry's do not. Only GETs (get, list, opening a watch) are safe
// for gotry to retry: a create is a POST, which gotry sends once; gotry's default
// rules treat PUT and DELETE as idempotent, but a Kubernetes update sent
// again after it took effect fails with 409 Conflict (its resourceVersion
// is stale) and a delete with 404, so a caller would see errors for writes
// that succeeded. A watch is a long GET; gotry's attempt ends at its
// response headers, so open watches hold no permit of the concurrency
// limit (TestKubernetesOpenWatchesLeaveTheLimitFree: 40 open, twice the
// initial limit, nothing in flight or shed).
//
// # What the tests measured
//
// Run with make sdk-test; each test logs its numbers.
//
//   - Under faults (TestKubernetesRecommendedSetUpUnderFaults): creates
//     throttled once (429), a get answered 503 with Retry-After, a list
//     whose connection was reset, a watch throttled once all succeed, with
//     the watch delivering its events; each create took effect once and
//     gotry retried nothing. A create answered 503 without Retry-After
//     fails with that 503: neither layer sends it again. The list's reset
//     was resent by net/http itself on a new connection, inside gotry's one
//     attempt (http.Transport does this for a GET on a reused connection).
//   - Even retrying with its defaults under client-go
//     (TestKubernetesGotryNeverResendsACreate), gotry sent no create twice:
//     one arrival after a 503 without Retry-After and after a reset
//     connection (both fail), two after a 429 with Retry-After (client-go's
//     resend, which succeeds).
//   - Reset streams over HTTP/2 (TLS; TestKubernetesResetStream): a Get
//     whose first stream the server resets succeeds under Wrap, after
//     client-go's one-second wait (1.0 s, two arrivals, two gotry
//     attempts, no gotry retry); under gotry at one attempt without the
//     adaptation it fails after one arrival. A create whose stream the
//     server reset after reading it (it took effect) fails and is not sent
//     again. A server that resets every Get's stream
//     (TestKubernetesResetStreamStormOpensTheBreaker) sees 5 sends of a
//     Get, not client-go's 11: the fifth reset opens gotry's breaker, and
//     client-go stops at its refusal (5.0 s).
//   - Requests reaching the API server per Get when every answer is an
//     error (4 workers × 5 Gets, TestKubernetesOutageArrivalsPerGet): 503
//     with "Retry-After: 0", client-go over gotry's defaults, 11.1 (222 for
//     20; client-go's 11 sends, gotry's retries cut by its budget; up to
//     33); the set-up above, 0.30–0.40 (6 to 8 for 20), the same for a 503
//     without Retry-After. 429 (a throttle): the set-up above, 5.8–11.0
//     (115–220 for 20: client-go's resends, each waiting the server's
//     Retry-After, some shed by gotry's limit, more under the race
//     detector), as when Classifier made a 429 a success to the breaker.
//   - gotry's retries under the QPS limiter
//     (TestKubernetesGotryRetriesBypassQPS): 40 Gets at QPS 20 (burst 1)
//     over gotry retrying with its defaults, each Get answered first by a
//     503 without Retry-After: the limiter held the Gets to 20 a second
//     (2.0 s), and the server saw 80 requests (40 a second): 40 gotry
//     retries, one per Get, none refused, since each succeeded and gave
//     its budget token back (seven runs, three under the race detector).
//     Before the budget gave back the token of a retry that succeeds
//     (issue #37), its reserve let 4 through (44 requests, 36 Gets
//     failed); with its earlier per-second floor, 63–68 requests and
//     23–28 retries.
//     If a proxy in front of the API server answers 502–504 without
//     Retry-After and reads should ride that out, allow gotry a retry on
//     those calls (transport.WithPolicy(ctx, transport.Policy{MaxAttempts:
//     2})) and count those retries in the load the QPS limit is meant to
//     bound.
package kubernetes
