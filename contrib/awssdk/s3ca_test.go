package awssdk_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/MrVSiK/gotry/contrib/awssdk"
	"github.com/MrVSiK/gotry/transport"
)

// isolateAWSConfig points the SDK's config loading at nothing on this
// machine: no shared config or credentials files, no instance metadata.
func isolateAWSConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "us-east-1")
}

// With AWS_CA_BUNDLE set, the SDK's config loading cannot take a wrapped
// HTTP client; loading the config first and putting gotry over the SDK's
// own transport (which carries the bundle's roots) works, over real TLS.
func TestS3CABundleWithGotry(t *testing.T) {
	srv := newFaultyS3(t, true)
	isolateAWSConfig(t)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(bundle, pemCert, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creds := config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""))

	// The trap: any client but the SDK's own is refused.
	wrapped := &http.Client{Transport: awssdk.S3Transport(http.DefaultTransport)}
	_, err := config.LoadDefaultConfig(ctx, creds, config.WithHTTPClient(wrapped))
	t.Logf("LoadDefaultConfig(WithHTTPClient(gotry)) with AWS_CA_BUNDLE: %v", err)
	if err == nil || !strings.Contains(err.Error(), "WithTransportOptions") {
		t.Fatalf("LoadDefaultConfig with a wrapped client and AWS_CA_BUNDLE: err = %v, want the SDK's WithTransportOptions refusal (the docs describe it)", err)
	}

	// The way: load, then put gotry over the SDK's transport.
	cfg, err := config.LoadDefaultConfig(ctx, creds)
	if err != nil {
		t.Fatal(err)
	}
	base, err := awssdk.SDKTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer base.CloseIdleConnections()
	cfg.HTTPClient = &http.Client{Transport: awssdk.S3Transport(base)}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.UsePathStyle = true
		o.Retryer = awssdk.S3Retryer(shortBackoff)
		// Over TLS the SDK sends checksummed bodies aws-chunked with a
		// trailer, which gofakes3 stores framing and all; checksums only
		// where S3 requires them keep plain bodies.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	srv.setPlan(firstN(slowDown, 1, "PutObject", "GetObject"))
	want := randomBytes(t, 2<<20)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader(want)}); err != nil {
		t.Fatalf("PutObject over TLS with the bundle's roots: %v", err)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("GetObject over TLS with the bundle's roots: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (err %v), want the %d written", len(got), err, len(want))
	}
	arrivals, _ := srv.counts()
	t.Logf("over TLS: arrivals %s", sortedOps(arrivals))

	// Without the bundle's roots the same set-up fails verification: the
	// roots came from the SDK's transport, not from anywhere else.
	plain := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.UsePathStyle = true
		o.HTTPClient = &http.Client{Transport: transport.New(&http.Transport{}, transport.WithMaxAttempts(1))}
		o.RetryMaxAttempts = 1
	})
	if _, err := plain.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}); err == nil {
		t.Fatal("GetObject without the bundle's roots succeeded: the test server's certificate is trusted anyway, so the test proves nothing")
	}
}
