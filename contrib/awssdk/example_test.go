package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/MrVSiK/gotry/contrib/awssdk"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// The AWS SDK for Go v2 over gotry: the SDK's retryer retries (S3's error
// codes, its POSTs, multi-MiB bodies it replays from their readers), and
// gotry sends each of its attempts once, with a breaker and a concurrency
// limit (and, given telemetry's option, telemetry of every physical
// attempt). The config is loaded
// without config.WithHTTPClient, which fails when AWS_CA_BUNDLE is set, and
// gotry goes over the transport the SDK built, which carries the bundle.
// It needs AWS credentials and a bucket, so it is built but not run.
func ExampleS3Transport() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	base, err := awssdk.SDKTransport(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// Telemetry of every attempt: pass telemetry.New().Transport()
	// (package github.com/MrVSiK/gotry/telemetry) after base.
	cfg.HTTPClient = &http.Client{Transport: awssdk.S3Transport(base)}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.Retryer = awssdk.S3Retryer() // the standard retryer; gotry's refusals final
	})

	// A read: hedged after 50ms (near its p95), with a per-attempt timeout,
	// both through the operation's context. Writes keep neither: a
	// per-attempt timeout would count their upload time.
	read := transport.WithPolicy(ctx, awssdk.ReadPolicy(50*time.Millisecond, 2*time.Second))
	out, err := client.GetObject(read, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("key")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = io.Copy(io.Discard, out.Body)
	out.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
}

// What S3Classifier changes for gotry's breaker, with a scripted
// RoundTripper (package transporttest) in place of S3: six 503 SlowDowns in
// a row are throttles, which the breaker does not count, so all six reach
// S3; six 500 InternalErrors are failures, and after the fifth (the
// breaker's default threshold) the breaker opens and the sixth request
// fails at once without being sent. Under the SDK, S3Retryer makes that
// refusal final.
func ExampleS3Classifier() {
	rt := transporttest.New(nil)
	rt.Handle("slowdown.s3.test/", transporttest.Steps(transporttest.Status(http.StatusServiceUnavailable)))
	rt.Handle("failing.s3.test/", transporttest.Steps(transporttest.Status(http.StatusInternalServerError)))
	client := &http.Client{Transport: awssdk.S3Transport(rt)}

	for _, host := range []string{"slowdown.s3.test", "failing.s3.test"} {
		var got []string
		for range 6 {
			resp, err := client.Get("http://" + host + "/bucket/key")
			switch {
			case errors.Is(err, transport.ErrCircuitOpen):
				got = append(got, "circuit-open")
			case err != nil:
				got = append(got, "error")
			default:
				resp.Body.Close()
				got = append(got, strconv.Itoa(resp.StatusCode))
			}
		}
		sent := 0
		for _, r := range rt.Requests() {
			if r.URL.Host == host {
				sent++
			}
		}
		fmt.Printf("%s: %s (%d sent)\n", host, strings.Join(got, " "), sent)
	}
	// Output:
	// slowdown.s3.test: 503 503 503 503 503 503 (6 sent)
	// failing.s3.test: 500 500 500 500 500 circuit-open (5 sent)
}
