// Package awssdk puts gotry under the AWS SDK for Go v2, which retries by
// itself, in a set-up its tests hold against a real S3 implementation on
// loopback (gofakes3 over memory) with injected faults: 500 InternalError,
// 503 SlowDown, reset connections and stalls. S3Transport is the entry
// point: gotry as the SDK's HTTP transport; S3Retryer is the SDK's
// retryer to go with it, and ReadPolicy the policy for reads.
//
// It is a module of its own, github.com/MrVSiK/gotry/contrib/awssdk, so
// that only programs that use it build against the AWS SDK. The package
// imports gotry and the SDK's core module (github.com/aws/aws-sdk-go-v2);
// its tests also require the S3 client, the SDK's config and gofakes3,
// which therefore appear on its users' build lists (go list -m all) too,
// at least at the versions its go.mod requires. Run the tests with make
// sdk-test.
//
// # Which layer retries
//
// When both the SDK and gotry retry, every SDK attempt is a new request to
// gotry and the attempts multiply; gotry's retry budget bounds only
// gotry's share. The SDK should keep retrying and gotry should send each
// of its attempts once (transport.WithMaxAttempts(1)), adding what the SDK
// does not have: a circuit breaker and a concurrency limit per host, and
// telemetry of every physical attempt (the SDK reports per operation). The
// SDK is the better retrying layer here because it knows its service:
// which error codes mean "again" (S3's 500 InternalError, its SlowDown),
// which POSTs the service lets it resend, how to replay bodies of any size
// from their readers. gotry, on its own, sends a POST once, retries 502,
// 503, 504 and 429 only, and replays a body only up to MaxBufferedBody (1
// MiB by default).
//
// # The set-up
//
// S3Transport, S3Retryer and ReadPolicy; see ExampleS3Transport:
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
//     WithConcurrencyLimit (S3Transport), plus telemetry's option
//     (telemetry.New().Transport(), package
//     github.com/MrVSiK/gotry/telemetry), as cfg.HTTPClient. S3Classifier
//     marks S3's 503s (SlowDown, ServiceUnavailable: "reduce your request
//     rate", sent without Retry-After) throttles, which the breaker does
//     not count and the concurrency limit does; and its 500 InternalError
//     a failure, which the breaker counts (gotry's default rules take a
//     500 for a final answer, a success to the breaker).
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
// # What the tests measured
//
// Run with make sdk-test; each test logs its numbers.
//
//   - Under faults (TestS3RecommendedSetUpKeepsEveryWriteUnderFaults): a 2
//     MiB PutObject after an InternalError and a reset, a multipart upload
//     of two 5 MiB parts and one of 1 MiB with SlowDown on both POSTs and
//     a reset and a SlowDown on a part, and stalled reads all succeed; the
//     objects read back byte for byte; CreateMultipartUpload and
//     CompleteMultipartUpload each took effect once (their SlowDowns come
//     before S3 acts); every arrival at S3 is one gotry attempt (as
//     counted by gotry's hooks, which its telemetry reads), at most the
//     SDK's three per operation.
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
//     byte for byte, in 2 or 3 attempts (16–21 requests for 8 writes), a
//     median of 0.8–1.9 s per write and 2.6 s at most (thirty-five runs,
//     fifteen of them under the race detector, the SDK's real backoff); the breaker
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
//     the concurrency limit, cut by the SlowDowns, sheds one; the SDK's
//     retry quota (500 tokens, 5 per throttle retry) bounds the retries
//     of a storm that lasts. (When
//     SlowDown opened the breaker, 0.12–0.17: the storm was answered as an
//     outage, and so was a burst of a fraction of a second.)
//
// # AWS_CA_BUNDLE
//
// With AWS_CA_BUNDLE set (or config.WithCustomCABundle),
// config.LoadDefaultConfig(ctx, config.WithHTTPClient(c)) fails for any
// client but the SDK's own ("unable to add custom RootCAs HTTPClient, has
// no WithTransportOptions, *http.Client"): it adds the bundle's roots to
// the SDK's client and cannot reach inside a wrapped one. Load the config
// without WithHTTPClient, take the transport the SDK built, which carries
// the roots (SDKTransport), and set cfg.HTTPClient to an *http.Client
// over gotry over that transport. TestS3CABundleWithGotry holds both the
// failure and the way out over real TLS.
package awssdk
