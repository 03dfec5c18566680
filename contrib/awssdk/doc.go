// Package sdk puts gotry under two SDKs that retry by themselves, the AWS
// SDK for Go v2 and Kubernetes client-go, in set-ups its tests hold against
// real local servers with injected faults: S3 requests against gofakes3 (a
// real S3 implementation) answering 500 InternalError, 503 SlowDown, reset
// connections and stalls; client-go against an API server speaking
// Kubernetes JSON, answering 429 and 503 with and without Retry-After.
// It is a module of its own, so neither SDK enters gotry's go.mod; run its
// tests with make sdk-test.
//
// # Which layer retries
//
// When both an SDK and gotry retry, every SDK attempt is a new request to
// gotry and the attempts multiply; gotry's retry budget bounds only
// gotry's share. For these two SDKs the SDK should keep retrying and gotry
// should send each of its attempts once (transport.WithMaxAttempts(1)),
// adding what the SDK does not have: a circuit breaker and a concurrency
// limit per host, and telemetry of every physical attempt (the SDKs report
// per operation). The SDK is the better retrying layer here because it
// knows its service: which error codes mean "again" (S3's 500
// InternalError, its SlowDown), which POSTs the service lets it resend, how
// to replay bodies of any size from their readers. gotry, on its own,
// sends a POST once, retries 502, 503, 504 and 429 only, and replays a body
// only up to MaxBufferedBody (1 MiB by default).
//
// # AWS SDK for Go v2
//
// The set-up (S3Transport, S3Retryer, ReadPolicy; see ExampleS3Transport):
//
//   - The SDK's standard retryer with two changes (S3Retryer): an error
//     from gotry's breaker or concurrency limit is final (RefusedByGotry).
//     The SDK retries every error its HTTP client returns as a connection
//     error; retrying a refusal spends backoff and retry quota on attempts
//     gotry refuses again without sending. And a throttle (SlowDown) is
//     waited out for at least half the SDK's own throttle backoff: with
//     the SDK's full jitter a retry may land at once, inside the throttle
//     that failed it.
//   - gotry with WithMaxAttempts(1), S3Classifier, WithBreaker and
//     WithConcurrencyLimit, plus telemetry's option, as cfg.HTTPClient.
//     S3Classifier marks S3's 503s (SlowDown, ServiceUnavailable: "reduce
//     your request rate", sent without Retry-After) throttles, which the
//     breaker does not count and the concurrency limit does; and its 500
//     InternalError a failure, which the breaker counts (gotry's default
//     rules take a 500 for a final answer, a success to the breaker).
//   - Reads may carry a policy on the operation's context
//     (transport.WithPolicy(ctx, ReadPolicy(hedgeDelay, perAttemptTimeout))):
//     one hedge of a slow GetObject, and a per-attempt timeout. Writes
//     should carry no per-attempt timeout: it counts their upload time.
//     A transport.Policy on the context of an SDK operation reaches every
//     one of its attempts; the tests hold this with a stalled GetObject
//     that its per-attempt timeout ends and the SDK's retry completes.
//
// A header timeout (transport.WithPerAttemptHeaderTimeout, or
// Policy.PerAttemptHeaderTimeout on a write's context) is safe for writes,
// slow uploads included: it starts once S3 may have the whole body,
// counting the bytes still queued between the client's socket and S3, so
// it does not cut an upload in progress, and it still cuts a server that
// has the request and does not answer. TestS3SlowUploadUnderAHeaderTimeout
// holds both sides with the set-up above plus a 1 s header timeout over a
// link of 2,000 KB/s up (transporttest.SlowLink): an 8 MiB PutObject
// reached S3 in one send, in 4.2–4.4 s, and read back byte for byte; a
// server that read the whole body and never answered was cut off 0.85–1.07
// s after it had it (seven runs, three under the race detector, on 2
// cores at a load of 6 to 11). Over plain HTTP the SDK reads a body once
// for its checksums before sending it, so it must be seekable (a
// bytes.Reader, an *os.File).
//
// What the tests measured (make sdk-test; each test logs its numbers):
//
//   - Under faults (TestS3RecommendedSetUpKeepsEveryWriteUnderFaults): a 2
//     MiB PutObject after an InternalError and a reset, a multipart upload
//     of two 5 MiB parts and one of 1 MiB with SlowDown on both POSTs and
//     a reset and a SlowDown on a part, and stalled reads all succeed; the
//     objects read back byte for byte; CreateMultipartUpload and
//     CompleteMultipartUpload each took effect once (their SlowDowns come
//     before S3 acts); every arrival at S3 is one gotry attempt, at most
//     the SDK's three per operation, and gotry's telemetry counted each
//     (its gotry.attempts counter equals the arrivals).
//   - With gotry as the only retrying layer (the SDK's retries off,
//     TestS3GotryAloneLosesWritesTheSDKWouldKeep), each of these fails on a
//     single fault: a PutObject after a 500 InternalError,
//     CreateMultipartUpload after a SlowDown (a POST; so would
//     CompleteMultipartUpload, failing the whole upload), a 5 MiB
//     UploadPart and a 2 MiB PutObject after a SlowDown (bodies over
//     MaxBufferedBody are sent once). A 1 KiB PutObject survives.
//   - A brief throttle is not an outage (issue #37;
//     TestS3ThrottleBurstKeepsEveryWrite): 8 concurrent 256 KiB
//     PutObjects meet 600 ms of 503 SlowDown on every request, then S3
//     works. With the set-up above every write succeeds and reads back
//     byte for byte, in 2 or 3 attempts (16–19 requests for 8 writes), a
//     median of 0.8–1.0 s per write and 2.6 s at most (thirty runs, ten of
//     them under the race detector, the SDK's real backoff); the breaker
//     stays closed and the limit, cut to 1–4 by the SlowDowns, shed
//     nothing. Before, five SlowDowns opened the breaker for 30 s and all
//     8 writes failed with circuit_open after one request each; with
//     SlowDown a throttle but the SDK's own full-jitter backoff, 11 of 120
//     writes (fifteen runs) failed, their three attempts all inside the
//     burst.
//   - An outage still opens the breaker
//     (TestS3OutageStillOpensTheBreaker, 4 workers × 10 PutObjects): with
//     every answer a 500 InternalError, or every connection refused, 5 or
//     6 requests reach S3 for the 40 operations (0.12–0.15 each) and the
//     rest fail at once with circuit_open. (Before S3Classifier, a 500
//     counted as a success and the breaker never opened: 75 requests,
//     bounded only by the SDK's retry quota.)
//   - Requests reaching S3 per operation in a SlowDown storm (every
//     request answered 503 SlowDown, 4 workers × 10 GetObjects,
//     TestS3SlowDownStormAttemptsPerOperation): the SDK's standard
//     retryer over gotry's defaults, 3.05 (122 for 40; up to 9, as many
//     as gotry's budget lets through); the set-up above, 1.7–2.8 (2.6–2.8
//     in plain runs, 1.7 under the race detector, whose slower requests
//     the limit shed more of): a throttle does not open the breaker, so
//     each operation makes the SDK's attempts (at most 3), fewer where
//     the concurrency limit, cut by the SlowDowns, sheds one; the SDK's retry quota (500 tokens, 5
//     per throttle retry) bounds the retries of a storm that lasts. (When
//     SlowDown opened the breaker, 0.12–0.17: the storm was answered as an
//     outage, and so was a burst of a fraction of a second.)
//
// AWS_CA_BUNDLE: with it set (or config.WithCustomCABundle),
// config.LoadDefaultConfig(ctx, config.WithHTTPClient(c)) fails for any
// client but the SDK's own ("unable to add custom RootCAs HTTPClient, has
// no WithTransportOptions, *http.Client"): it adds the bundle's roots to
// the SDK's client and cannot reach inside a wrapped one. Load the config
// without WithHTTPClient, take the transport the SDK built, which carries
// the roots (SDKTransport), and set cfg.HTTPClient to an *http.Client
// over gotry over that transport. TestS3CABundleWithGotry holds both the
// failure and the way out over real TLS.
//
// # Kubernetes client-go
//
// client-go resends a request, whatever its verb (a create's POST
// included), when the answer is a 429 or any 5xx carrying Retry-After, up
// to 10 times, waiting the Retry-After; and a GET whose connection was
// reset or ended early. A typed client cannot turn that off
// (rest.Request.MaxRetries is not reachable through it). The API server
// answers 429 from priority and fairness before it acts, so those resends
// are safe; client-go is the retrying layer. (A 5xx with Retry-After may
// come after the server acted, from a request that timed out but still
// completes; client-go's resend of a create then fails with 409
// AlreadyExists. That is client-go's behaviour, the same with or without
// gotry.)
//
// The set-up (KubernetesWrap; see ExampleKubernetesWrap):
// cfg.Wrap(KubernetesWrap(tel.Transport())), which is gotry with
// WithMaxAttempts(1), WithBreaker, WithConcurrencyLimit and
// KubernetesClassifier (a 429 is final for gotry). A 429, and a 503 whose
// Retry-After asks for a wait, are throttles, which gotry's breaker does
// not count: they ask this client to slow down, which client-go does; they
// do not mean the server is down. client-go does not retry gotry's
// refusals, so an open breaker fails calls at once.
//
// Over HTTP/2 (what an API server speaks over TLS) a server that fails one
// request resets its stream where over HTTP/1.1 it closes the connection.
// client-go resends a GET whose connection was reset, not one whose stream
// was, and gotry at one attempt sends it once: the GET failed. The
// transport KubernetesWrap returns (KubernetesTransport) reports a GET's
// reset or refused stream to client-go as a connection reset too (the
// error also matches syscall.ECONNRESET), so client-go resends it, a
// second later and through its QPS limiter, as it does over HTTP/1.1. The
// retrying layer stays client-go, whose resends the QPS limit bounds; gotry
// still sends each request once and counts each reset against its
// breaker, which client-go does not resend past. (The other way, letting
// gotry retry a reset stream at one configured attempt, would have
// changed what MaxAttempts means for every user, and its retries would
// bypass the QPS limiter.) A create, or any other verb, whose stream was
// reset is sent once: it may have taken effect.
//
// rest.Config.WrapTransport (and Wrap) put gotry directly over client-go's
// HTTP transport, under its authentication and user-agent wrappers and
// under its QPS limiter: client-go's own retries wait for the limiter,
// gotry's do not. Only GETs (get, list, opening a watch) are safe for gotry
// to retry: a create is a POST, which gotry sends once; gotry's default
// rules treat PUT and DELETE as idempotent, but a Kubernetes update sent
// again after it took effect fails with 409 Conflict (its resourceVersion
// is stale) and a delete with 404, so a caller would see errors for writes
// that succeeded. A watch is a long GET; gotry's attempt ends at its
// response headers, so open watches hold no permit of the concurrency
// limit (TestKubernetesOpenWatchesLeaveTheLimitFree: 40 open, twice the
// initial limit, nothing in flight or shed).
//
// What the tests measured:
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
//     whose first stream the server resets succeeds under KubernetesWrap,
//     after client-go's one-second wait (1.0 s, two arrivals, two gotry
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
//     detector), as before this change,
//     when KubernetesClassifier made a 429 a success to the breaker.
//   - gotry's retries under the QPS limiter
//     (TestKubernetesGotryRetriesBypassQPS): 40 Gets at QPS 20 (burst 1)
//     over gotry retrying with its defaults, each Get answered first by a
//     503 without Retry-After: the limiter held the Gets to 20 a second
//     (2.0 s), and the server saw 44 requests (22 a second): 4 gotry
//     retries, which its budget's reserve bounded (36 Gets failed when it
//     refused; with the budget's earlier per-second floor, 63–68 requests
//     and 23–28 retries).
//     If a proxy in front of the API server answers 502–504 without
//     Retry-After and reads should ride that out, allow gotry a retry on
//     those calls (transport.WithPolicy(ctx, transport.Policy{MaxAttempts:
//     2})) and count those retries in the load the QPS limit is meant to
//     bound.
package awssdk
