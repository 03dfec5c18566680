package awssdk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/MrVSiK/gotry/contrib/awssdk"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// The slow link of issue #37: 2,000 KB/s from the client to S3, the
// answers unthrottled, and an 8 MiB object, twice what the buffers between
// the client and the link take at once, so that the client's write of the
// body ends seconds before S3 has it.
const (
	slowUpRate = 2000 << 10 // bytes per second
	slowObject = 8 << 20
)

// slowS3Client is an S3 client for the endpoint at url (a SlowLink's) with
// the recommended set-up (S3Transport, under retryer) and a 1 s header
// timeout, over the HTTP transport the SDK builds by default (SDKTransport
// of a default config: ExpectContinueTimeout 1 s, so a body over the S3
// client's 2 MB threshold, sent with Expect: 100-continue, waits for the
// server's 100 Continue). It returns the counter of gotry's attempts.
func slowS3Client(t *testing.T, url string, retryer aws.Retryer) (*s3.Client, *keyCounter) {
	t.Helper()
	base, err := awssdk.SDKTransport(aws.Config{HTTPClient: awshttp.NewBuildableClient()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.CloseIdleConnections)
	seen := &keyCounter{}
	tr := awssdk.S3Transport(base, seen.hooks(), transport.WithPerAttemptHeaderTimeout(time.Second))
	return newS3At(url, tr, retryer), seen
}

// countingBody is a seekable request body that counts the bytes read from
// it, to show how often the SDK reads a PutObject's body. It has only Read
// and Seek, so nothing reads past it (a bytes.Reader's WriteTo would).
type countingBody struct {
	r    *bytes.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Seek(offset int64, whence int) (int64, error) {
	return b.r.Seek(offset, whence)
}

// silentS3 stands in for S3 as a server that does not answer: it reads
// each PUT's whole body, records when it had it and the body's hash, and
// then waits for the client to go away.
type silentS3 struct {
	*httptest.Server
	puts atomic.Int32 // PUT arrivals

	mu   sync.Mutex // guards have and sums
	have []time.Time
	sums [][sha256.Size]byte
}

func newSilentS3(t *testing.T) *silentS3 {
	s := &silentS3{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			http.Error(w, "a PUT is all this server takes", http.StatusMethodNotAllowed)
			return
		}
		s.puts.Add(1)
		h := sha256.New()
		if _, err := io.Copy(h, r.Body); err != nil {
			return // cut off while uploading
		}
		s.mu.Lock()
		s.have = append(s.have, time.Now())
		s.sums = append(s.sums, [sha256.Size]byte(h.Sum(nil)))
		s.mu.Unlock()
		<-r.Context().Done()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *silentS3) bodies() ([]time.Time, [][sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.have...), append([][sha256.Size]byte(nil), s.sums...)
}

// A header timeout makes slow uploads safe under the SDK (issue #37),
// judged on both sides in one run. The recommended set-up plus
// transport.WithPerAttemptHeaderTimeout(1s), an 8 MiB PutObject over a
// link of 2,000 KB/s up (4.1 s of upload, three seconds of it after the
// client's write has ended): S3 gets it in one send, neither the SDK nor
// gotry sends it again, and it reads back byte for byte. And a server that
// has the whole body and never answers is still cut off by the header
// timeout about a second after it had the body.
//
// Over plain HTTP, the SDK reads a PutObject's body once before sending
// it, to compute its CRC32 (x-amz-checksum-crc32) and its SHA-256 (the
// signature's payload hash), and seeks back to the start, so the body must
// be seekable (a bytes.Reader here, an *os.File in production); then
// http.Transport reads it as it sends it, and only those reads are gotry's
// to meter. Over HTTPS the SDK sends it aws-chunked with the checksum in a
// trailer, reading it once, as it is sent (not run here: gofakes3 keeps
// the chunk framing in the object).
func TestS3SlowUploadUnderAHeaderTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("two 8 MiB uploads over a 2,000 KB/s link: skipped with -short")
	}
	t.Run("the upload is sent once and kept", func(t *testing.T) {
		srv := newFaultyS3(t, false)
		link := transporttest.StartSlowLink(t, srv.Listener.Addr().String(), slowUpRate, 0)
		client, seen := slowS3Client(t, link.URL(), awssdk.S3Retryer())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		data := randomBytes(t, slowObject)
		body := &countingBody{r: bytes.NewReader(data)}

		start := time.Now()
		_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("slow"), Body: body})
		took := time.Since(start)
		arrivals, _ := srv.counts()
		attempts := seen.get("/" + bucket + "/slow")
		t.Logf("8 MiB PutObject over 2,000 KB/s: %v, %d arrivals at S3, %d gotry attempts, the body read %.1f times",
			took.Round(time.Millisecond), arrivals["PutObject"], attempts, float64(body.read.Load())/slowObject)
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		if arrivals["PutObject"] != 1 || attempts != 1 {
			t.Errorf("%d PutObjects arrived, gotry made %d attempts; want one of each", arrivals["PutObject"], attempts)
		}
		// The link carried it: at 2,000 KB/s, 8 MiB take 4.1 s.
		if least := 3700 * time.Millisecond; took < least {
			t.Errorf("the upload took %v, under the %v the link needs: it was not throttled", took, least)
		}
		if got := body.read.Load(); got != 2*slowObject {
			t.Errorf("the SDK and http.Transport read %d bytes of the body, want %d (a checksum pass, then the send)", got, 2*slowObject)
		}

		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("slow")})
		if err != nil {
			t.Fatalf("GetObject: %v", err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("read back %d bytes (err %v), not the %d written", len(got), err, len(data))
		}
	})

	t.Run("a server that has the body and never answers is cut off", func(t *testing.T) {
		srv := newSilentS3(t)
		link := transporttest.StartSlowLink(t, srv.Listener.Addr().String(), slowUpRate, 0)
		// One SDK attempt, so that the cut is the first attempt's and the
		// SDK's retry does not send the body again.
		client, seen := slowS3Client(t, link.URL(), awssdk.S3Retryer(func(o *retry.StandardOptions) { o.MaxAttempts = 1 }))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		data := randomBytes(t, slowObject)

		start := time.Now()
		_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("silent"), Body: bytes.NewReader(data)})
		cut := time.Now()
		have, sums := srv.bodies()
		if len(have) != 1 || sums[0] != sha256.Sum256(data) {
			t.Fatalf("error %v after %v, with %d whole bodies received, want 1 identical to the one sent",
				err, cut.Sub(start).Round(time.Millisecond), len(have))
		}
		after := cut.Sub(have[0])
		t.Logf("the server had the body %v after the PutObject started; cut off %v after that: %v",
			have[0].Sub(start).Round(time.Millisecond), after.Round(time.Millisecond), err)
		if !errors.Is(err, transport.ErrAttemptTimeout) {
			t.Fatalf("error %v, want gotry's header timeout", err)
		}
		if n, attempts := srv.puts.Load(), seen.get("/"+bucket+"/silent"); n != 1 || attempts != 1 {
			t.Errorf("%d PutObjects arrived, gotry made %d attempts; want one of each", n, attempts)
		}
		if after < 500*time.Millisecond || after > 3*time.Second {
			t.Errorf("cut off %v after the server had the body, want about the 1s timeout (0.5s to 3s)", after.Round(time.Millisecond))
		}
	})
}
