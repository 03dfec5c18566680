package awssdk_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/MrVSiK/gotry/contrib/awssdk"
	"github.com/MrVSiK/gotry/transport"
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
